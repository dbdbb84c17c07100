"""Issue 29 item 1: every patch of moto carries its card, and the rules over the cards are derived from the registry
(a patch added without a card, a test, an upstream report or a place in the order cannot slip past)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from omnireel_local import patches
from omnireel_local.patches import cards

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = ROOT / "local" / "UPSTREAM.md"
KINDS = {cards.MOTO_BUG, cards.LOCAL_DESIGN, cards.SPEED, cards.FAULT_HOOK}
ALL = sorted(patches.CARDS.values(), key=lambda c: (int(re.match(r"\d+", c.number)[0]), c.number))  # type: ignore[index]


def test_the_registry_holds_every_module_s_cards_once() -> None:
    numbers = [card.number for module in patches.MODULES for card in module.CARDS]
    assert len(numbers) == len(set(numbers)) == len(patches.CARDS) >= 30
    folder = Path(patches.__file__).parent
    with_cards = {p.stem for p in folder.glob("*.py") if "CARDS = [" in p.read_text()}
    assert with_cards == {m.__name__.rsplit(".", 1)[1] for m in patches.MODULES}  # no module left out of MODULES


@pytest.mark.parametrize("card", ALL, ids=[c.number for c in ALL])
def test_each_card_is_complete(card: cards.Patch) -> None:
    assert card.title and card.aws and card.moto and card.upstream in KINDS
    path, _, name = card.test.partition("::")
    test_file = ROOT / path
    assert test_file.is_file(), card.test
    defined = {n.name for n in ast.walk(ast.parse(test_file.read_text())) if isinstance(n, ast.FunctionDef)}
    assert name in defined, f"patch {card.number}: {card.test} does not exist"
    assert (card.installs is None) == (card.installed_with is not None), card.number


def test_the_order_installs_every_patch_once_21_first_iam_last() -> None:
    installed = [n for n, c in patches.CARDS.items() if c.installs is not None]
    assert sorted(patches.ORDER) == sorted(installed) and len(set(patches.ORDER)) == len(patches.ORDER)
    assert patches.ORDER[0] == "21" and patches.ORDER[-2:] == ("9", "12")
    for card in patches.CARDS.values():
        if card.installed_with is not None:
            assert card.installed_with in patches.ORDER, card.number
    order = patches.ORDER
    assert order.index("25") < order.index("29") < order.index("30")  # each wraps the send method installed before


@pytest.mark.parametrize("card", [c for c in ALL if c.upstream == cards.MOTO_BUG], ids=lambda c: c.number)
def test_every_moto_bug_has_a_ready_to_file_report(card: cards.Patch) -> None:
    text = UPSTREAM.read_text()
    heading = re.search(rf"^## Patch {re.escape(card.number)}: .+$", text, re.M)
    assert heading, f"local/UPSTREAM.md has no section '## Patch {card.number}: ...'"
    section = text[heading.end() :].split("\n## ", 1)[0]
    for part in ("**Reproduction**", "**Expected**", "**Actual**"):
        assert part in section, f"patch {card.number}: {part} missing"


def test_no_report_for_a_patch_that_is_not_a_moto_bug() -> None:
    reported = set(re.findall(r"^## Patch ([0-9]+[a-z]?): ", UPSTREAM.read_text(), re.M))
    assert reported == {c.number for c in ALL if c.upstream == cards.MOTO_BUG}


def test_the_readme_lists_every_patch() -> None:
    section = (ROOT / "local" / "README.md").read_text().split("## moto patches", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\s*(?:\*\*)?([0-9]+[a-z]?)\.(?:\*\*)? ", section, re.M))
    assert listed == set(patches.CARDS)
