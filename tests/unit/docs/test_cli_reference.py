"""docs/cli.md is what ``omnireel_cli.reference.render()`` makes of the CLI's parser now (issue 36 item 5): a command,
option, default or help text changed in the parser without ``make docs`` fails here, so the reference cannot drift."""

from __future__ import annotations

import argparse

import pytest

from omnireel_cli import reference
from omnireel_cli.main import build_parser
from omnireel_template import ROOT

CLI_MD = ROOT / "docs" / "cli.md"


def test_docs_cli_md_is_what_the_parser_renders_now() -> None:
    assert CLI_MD.read_text() == reference.render(), "docs/cli.md is stale: run `make docs` (omnireel_cli.reference)"


def test_every_command_of_the_parser_has_its_section_and_row() -> None:
    text = CLI_MD.read_text()
    found = list(reference.commands(build_parser()))
    assert len(found) >= 20 and ("local", "up") in [path for path, _, _ in found]
    for path, _, command in found:
        words = " ".join(path)
        assert f"\n## `omnireel {words}`\n" in text
        assert f"| [`omnireel {words}`](#omnireel-{'-'.join(path)}) |" in text
        for action in command._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, f"omnireel {words} {option}"


def test_a_changed_option_changes_the_page() -> None:
    parser = build_parser()
    before = reference.render(parser)
    submit = next(c for p, _, c in reference.commands(parser) if p == ("submit",))
    submit.add_argument("--brand-new", help="an option the page does not have yet")
    assert reference.render(parser) != before and "`--brand-new BRAND_NEW`" in reference.render(parser)


def test_a_note_for_a_command_that_does_not_exist_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(reference.NOTES, ("no-such-command",), "text")
    with pytest.raises(ValueError, match="no-such-command"):
        reference.render()


def test_the_page_does_not_depend_on_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.render()
    monkeypatch.setenv("COLUMNS", "300")
    assert reference.render() == narrow


def test_a_pipe_in_an_argument_does_not_break_the_table() -> None:
    parser = argparse.ArgumentParser(prog="omnireel")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("x", help="h").add_argument("what", metavar="A | B", help="one | the other")
    rows = [line for line in reference.render(parser, notes={}).splitlines() if line.startswith("| `A")]
    assert rows == ["| `A \\| B` |  | one \\| the other |"]
