"""Every alarm of template.yaml has a runbook entry (issue 36 item 5): the alarms are derived from the template (every
resource of type ``AWS::CloudWatch::Alarm``), and each has a heading of its own, ``### `AlarmName` ``, on a runbook
page under docs/operations/ (what fires it, what it means, what to do), a row on the alarms page that links to that
entry, and a place in the operations index. A new alarm without a runbook entry fails here."""

from __future__ import annotations

import re
from pathlib import Path

from omnireel_template import ROOT, load_template

OPERATIONS = ROOT / "docs" / "operations"
INDEX = ROOT / "docs" / "operations.md"
ALARMS_PAGE = OPERATIONS / "alarms.md"


def template_alarms() -> set[str]:
    return {name for name, r in load_template()["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}


def runbook_entries(pages: dict[str, str]) -> dict[str, str]:
    """Alarm name -> the page whose heading names it alone (``## `X` ``, ``### `X` `` or ``#### `X` ``)."""
    found: dict[str, str] = {}
    for page, text in pages.items():
        for name in re.findall(r"^#{2,4} `(\w+)`\s*$", text, re.M):
            found.setdefault(name, page)
    return found


def missing_entries(alarms: set[str], pages: dict[str, str]) -> list[str]:
    return sorted(alarms - set(runbook_entries(pages)))


def _pages() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(OPERATIONS.glob("*.md"))}


def test_the_rule_sees_the_templates_alarms() -> None:
    alarms = template_alarms()
    assert len(alarms) >= 15
    assert {"PipelineExecutionsFailedAlarm", "WebhookDeadLetterQueueAlarm", "RelayTarget5xxAlarm"} <= alarms


def test_every_alarm_has_a_runbook_entry() -> None:
    missing = missing_entries(template_alarms(), _pages())
    assert not missing, f"alarms without a runbook entry (a heading '### `Name`' on a docs/operations/ page): {missing}"


def test_the_alarms_page_links_each_alarm_to_its_entry() -> None:
    entries = runbook_entries(_pages())
    table = ALARMS_PAGE.read_text()
    for alarm in sorted(template_alarms()):
        row = next((line for line in table.splitlines() if line.startswith(f"| `{alarm}` |")), None)
        assert row, f"docs/operations/alarms.md: no row for `{alarm}`"
        link = f"({entries[alarm]}#{alarm.lower()})"
        assert link in row, f"docs/operations/alarms.md: `{alarm}`'s row does not link {link}"


def test_the_operations_index_names_every_alarm() -> None:
    index = INDEX.read_text()
    missing = sorted(a for a in template_alarms() if f"`{a}`" not in index)
    assert not missing, f"docs/operations.md 'By alarm' does not name {missing}"


def test_an_alarm_without_an_entry_is_found() -> None:
    pages = {"a.md": "# A\n\n### `OneAlarm`\n\ntext, and `OtherAlarm` in passing\n"}
    assert missing_entries({"OneAlarm", "OtherAlarm"}, pages) == ["OtherAlarm"]


def test_runbook_pages_live_under_docs_operations() -> None:
    assert Path(OPERATIONS).is_dir() and len(_pages()) >= 10
