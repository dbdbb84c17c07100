"""moto patch 33: UpdateItem's validation finds each processor's handler once per node class, with the same outcomes.

The same updates and the same refusals run on moto as shipped and with the patch, on a fresh table each: the items
they leave and the errors they raise must be identical, and the patched run must ask the processors for their class
maps far less often (moto asked at every node of every walk)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser

from omnireel_local.patches.speed import patch_update_traversal
from tests.support.dynamodb_tables import jobs_table

KEY = {"job_id": {"S": "a"}}
ITEM = {
    "job_id": {"S": "a"},
    "status": {"S": "accepted"},
    "attempts": {"N": "0"},
    "stage_times": {"M": {}},
    "tags": {"SS": ["x", "y"]},
    "history": {"L": []},
    "open_shard": {"S": "3"},
}
# (UpdateExpression, names, values): what the stores do, and what DynamoDB refuses.
UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("SET #s = :s, updated_at = :now, stage_times.#s = if_not_exists(stage_times.#s, :now) REMOVE open_shard",
     {"#s": "status"}, {":s": {"S": "generating_image"}, ":now": {"S": "2026-12-05T16:00:00Z"}}),
    ("SET attempts = attempts + :one, history = list_append(history, :h)", {},
     {":one": {"N": "1"}, ":h": {"L": [{"S": "retry"}]}}),
    ("ADD tags :t, counter :one DELETE tags :gone", {},  # ADD and DELETE on one set: overlapping paths
     {":t": {"SS": ["z"]}, ":one": {"N": "1"}, ":gone": {"SS": ["x"]}}),
    ("SET job_id = :k", {}, {":k": {"S": "b"}}),  # a key attribute: refused
    ("SET missing = nothing.here + :one", {}, {":one": {"N": "1"}}),  # a reserved word as a name
    ("SET attempts = attempts + :s", {}, {":s": {"S": "x"}}),  # a string added to a number
    ("SET a = :v, a = :v", {}, {":v": {"S": "1"}}),  # two actions on one path
    ("SET a = :nothing", {}, {":v": {"S": "1"}}),  # a value never used
    ("SET stage_times.done = :v REMOVE stage_times.accepted", {}, {":v": {"N": "5"}}),
]  # fmt: skip


def update_outcome(ddb: Any, expression: str, names: dict[str, str], values: dict[str, Any]) -> tuple[Any, ...]:
    """UpdateItem on the fixture's item: ``("ok", the new item)`` or ``("refused", code, message)``."""
    extra: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
    try:
        answer = ddb.update_item(TableName="jobs", Key=KEY, UpdateExpression=expression,
                                 ExpressionAttributeValues=values, ReturnValues="ALL_NEW", **extra)  # fmt: skip
    except ClientError as refused:
        return ("refused", refused.response["Error"]["Code"], refused.response["Error"]["Message"])
    return ("ok", answer["Attributes"])


def _outcomes() -> list[Any]:
    ddb = jobs_table(ITEM)
    outcomes: list[Any] = [update_outcome(ddb, *update) for update in UPDATES]
    outcomes.append(("item", ddb.get_item(TableName="jobs", Key=KEY)["Item"]))
    return outcomes


def _counting_maps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every processor's ``_processing_map`` call (all processors inherit the lookup from one place)."""
    calls = [0]
    classes = {cls for cls in _subclasses(DepthFirstTraverser) if "_processing_map" in vars(cls)}
    for cls in classes:
        original = vars(cls)["_processing_map"]

        def counted(self: Any, _original: Any = original) -> Any:
            calls[0] += 1
            return _original(self)

        monkeypatch.setattr(cls, "_processing_map", counted)
    return calls


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_same_updates_and_errors_with_one_lookup_per_node_class(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_maps(monkeypatch)
    with mock_aws():
        shipped = _outcomes()
    shipped_calls, calls[0] = calls[0], 0
    with mock_aws():
        patch_update_traversal(monkeypatch.setattr)
        patched = _outcomes()
    assert patched == shipped
    refused = [outcome for outcome in shipped if outcome[0] == "refused"]
    assert len(refused) == 6, shipped  # the six refusals above are refused (the fixture is not vacuous)
    assert calls[0] * 2 < shipped_calls, (calls[0], shipped_calls)  # once per node class, not at every node
