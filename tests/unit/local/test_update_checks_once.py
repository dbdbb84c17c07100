"""moto patches 36 and 37: UpdateItem's shape checks run once per (expression, names) pair, and the expression's tree is
copied node by node, with the same outcomes.

The same updates and refusals (each sent twice, as the product sends the same few expressions over and over) run on
moto as shipped and with the patches, on a fresh table each: the answers, the errors and the item left must be
identical; the patched run must check each pair that passed once, and a pair that failed every time. The copy is
compared with ``copy.deepcopy``'s, node for node."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from moto import mock_aws
from moto.dynamodb.parsing.ast_nodes import Node
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.parsing.validators import ActionCountValidator, OverlappingPathsValidator

from omnireel_local.patches.speed import (
    copy_tree,
    patch_update_checks_once,
    patch_update_expression_cache,
    patch_update_traversal,
    patch_update_tree_copy,
)
from tests.support.dynamodb_tables import jobs_table
from tests.unit.local.test_update_traversal import ITEM, KEY, UPDATES, update_outcome

# More shapes: one section of each kind, nested paths and list indexes, the same path under two names, two SET sections.
MORE: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("SET history[0] = :h, stage_times.#a.#b = :v ADD attempts :one DELETE tags :gone REMOVE open_shard",
     {"#a": "x", "#b": "y"}, {":h": {"S": "first"}, ":v": {"N": "1"}, ":one": {"N": "1"}, ":gone": {"SS": ["y"]}}),
    ("SET #p = :v, #q = :v", {"#p": "dup", "#q": "dup"}, {":v": {"S": "1"}}),  # one path under two names: refused
    ("SET #p = :v, #q = :v", {"#p": "one", "#q": "two"}, {":v": {"S": "1"}}),  # the same tree, other names: accepted
    ("SET a = :v SET b = :v", {}, {":v": {"S": "1"}}),  # two SET sections: refused
]  # fmt: skip


def _outcomes(calls: list[int]) -> tuple[list[Any], list[int]]:
    """The outcomes of two rounds of every update, and the checks' walks in each round."""
    ddb = jobs_table(ITEM)
    outcomes: list[Any] = []
    walks = []
    for _ in range(2):
        calls[0] = 0
        outcomes += [update_outcome(ddb, *update) for update in [*UPDATES, *MORE]]
        walks.append(calls[0])
    outcomes.append(("item", ddb.get_item(TableName="jobs", Key=KEY)["Item"]))
    return outcomes, walks


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    for cls in (ActionCountValidator, OverlappingPathsValidator):
        original = cls.traverse

        def counted(self: Any, node: Any, _original: Any = original) -> Any:
            calls[0] += 1
            return _original(self, node)

        monkeypatch.setattr(cls, "traverse", counted)
    return calls


def test_the_same_updates_and_errors_with_the_checks_once_per_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_checks(monkeypatch)
    with mock_aws():
        shipped, shipped_walks = _outcomes(calls)
    with mock_aws():
        for patch in (patch_update_expression_cache, patch_update_traversal, patch_update_checks_once,
                      patch_update_tree_copy):  # fmt: skip
            patch(monkeypatch.setattr)
        patched, patched_walks = _outcomes(calls)
    assert patched == shipped
    refused = [outcome for outcome in shipped if outcome[0] == "refused"]
    assert len(refused) == 2 * 9, shipped  # the nine refusals above, each time (the fixture is not vacuous)
    # moto walks the same in both rounds; patched, the first round is moto's and the second walks only for the pairs
    # that fail a check: three overlapping paths (both checks: 2 walks each) and two SET sections (the count: 1).
    assert shipped_walks[0] == shipped_walks[1] == patched_walks[0] > 20, (shipped_walks, patched_walks)
    assert patched_walks[1] == 3 * 2 + 1, patched_walks


def _same_tree(copied: Any, original: Any, parent: Any, seen: set[int]) -> None:
    assert type(copied) is type(original) and copied is not original
    assert set(vars(copied)) == set(vars(original)) and copied.type == original.type
    assert copied.parent is parent
    assert id(copied) not in seen
    seen.add(id(copied))
    if original.children is None:
        assert copied.children is None
        return
    assert len(copied.children) == len(original.children) and copied.children is not original.children
    for mine, theirs in zip(copied.children, original.children, strict=True):
        if isinstance(theirs, Node):
            _same_tree(mine, theirs, copied, seen)
        else:
            assert mine == theirs and type(mine) is type(theirs)


def _parses(expression: str) -> bool:
    try:
        UpdateExpressionParser.make(expression)
    except Exception:  # a reserved word: moto refuses it before any tree exists
        return False
    return True


TREES = sorted(expression for expression in {e for e, _, _ in [*UPDATES, *MORE]} if _parses(expression))


def test_the_trees_compared_cover_the_updates() -> None:
    assert len(TREES) >= len(UPDATES) + len(MORE) - 2  # one expression repeated, one refused by the parser


@pytest.mark.parametrize("expression", TREES)
def test_the_tree_copy_is_the_deep_copy(expression: str) -> None:
    tree = UpdateExpressionParser.make(expression)
    _same_tree(copy.deepcopy(tree), tree, None, set())  # the comparison holds for copy.deepcopy's own copy
    _same_tree(copy_tree(tree), tree, None, set())
