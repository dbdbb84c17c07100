"""moto patch 35: each condition expression string is lexed once, with the same outcomes.

The same writes, queries and refusals -- each expression sent twice, as the product sends the same few expressions
over and over -- run on moto as shipped and with the patch, on a fresh table each: the items they leave, the items
they find and the errors they raise must be identical, and the patched run must lex each string once."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.comparisons import ConditionExpressionParser

from omnireel_local.patches.speed import patch_condition_lex_cache
from tests.support.dynamodb_tables import jobs_table

ITEM = {"job_id": {"S": "a"}, "status": {"S": "accepted"}, "attempts": {"N": "0"}, "caller": {"S": "c1"}}
NAMES = {"#s": "status"}
# (operation, its arguments): conditions that hold, conditions that fail, filters, key conditions, a syntax error.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("update_item", {"Key": {"job_id": {"S": "a"}}, "UpdateExpression": "SET #s = :new",
                     "ConditionExpression": "#s = :old AND attribute_exists(job_id)", "ExpressionAttributeNames": NAMES,
                     "ExpressionAttributeValues": {":new": {"S": "queued"}, ":old": {"S": "accepted"}}}),
    ("update_item", {"Key": {"job_id": {"S": "a"}}, "UpdateExpression": "SET #s = :new",
                     "ConditionExpression": "#s = :old AND attribute_exists(job_id)", "ExpressionAttributeNames": NAMES,
                     "ExpressionAttributeValues": {":new": {"S": "done"}, ":old": {"S": "accepted"}}}),  # now fails
    ("put_item", {"Item": {**ITEM, "job_id": {"S": "b"}}, "ConditionExpression": "attribute_not_exists(job_id)"}),
    ("put_item", {"Item": {**ITEM, "job_id": {"S": "b"}}, "ConditionExpression": "attribute_not_exists(job_id)"}),
    ("query", {"KeyConditionExpression": "job_id = :k", "FilterExpression": "attempts < :n OR (#s IN (:a, :b))",
               "ExpressionAttributeNames": NAMES,
               "ExpressionAttributeValues": {":k": {"S": "a"}, ":n": {"N": "1"}, ":a": {"S": "x"}, ":b": {"S": "y"}}}),
    ("query", {"KeyConditionExpression": "job_id = :k", "FilterExpression": "attempts < :n OR (#s IN (:a, :b))",
               "ExpressionAttributeNames": NAMES,
               "ExpressionAttributeValues": {":k": {"S": "b"}, ":n": {"N": "0"}, ":a": {"S": "x"}, ":b": {"S": "y"}}}),
    ("scan", {"FilterExpression": "begins_with(caller, :p) AND NOT attempts BETWEEN :lo AND :hi",
              "ExpressionAttributeValues": {":p": {"S": "c"}, ":lo": {"N": "5"}, ":hi": {"N": "9"}}}),
    ("scan", {"FilterExpression": "begins_with(caller, :p) AND NOT attempts BETWEEN :lo AND :hi",
              "ExpressionAttributeValues": {":p": {"S": "c"}, ":lo": {"N": "5"}, ":hi": {"N": "9"}}}),
    ("delete_item", {"Key": {"job_id": {"S": "b"}}, "ConditionExpression": "attempts = :n AND #s <> :s",
                     "ExpressionAttributeNames": NAMES,
                     "ExpressionAttributeValues": {":n": {"N": "1"}, ":s": {"S": "x"}}}),  # fails
    ("delete_item", {"Key": {"job_id": {"S": "b"}}, "ConditionExpression": "attempts = :n AND #s <> :s",
                     "ExpressionAttributeNames": NAMES,
                     "ExpressionAttributeValues": {":n": {"N": "0"}, ":s": {"S": "x"}}}),
]  # fmt: skip


def _outcomes() -> list[Any]:
    ddb = jobs_table(ITEM)
    outcomes: list[Any] = []
    for operation, arguments in CALLS:
        try:
            answer = getattr(ddb, operation)(TableName="jobs", **arguments)
            outcomes.append(("ok", answer.get("Items"), answer.get("Count")))
        except ClientError as refused:
            outcomes.append(("refused", refused.response["Error"]["Code"], refused.response["Error"]["Message"]))
    outcomes.append(("items", sorted(str(i) for i in ddb.scan(TableName="jobs")["Items"])))
    return outcomes


def test_the_same_answers_and_refusals_with_one_lexing_per_string(monkeypatch: pytest.MonkeyPatch) -> None:
    lexings: list[str] = []
    original = ConditionExpressionParser._lex_condition_expression

    def counted(self: Any) -> Any:
        lexings.append(self.condition_expression)
        return original(self)

    monkeypatch.setattr(ConditionExpressionParser, "_lex_condition_expression", counted)
    with mock_aws():
        shipped = _outcomes()
    shipped_lexings, lexings[:] = list(lexings), []
    with mock_aws():
        patch_condition_lex_cache(monkeypatch.setattr)
        patched = _outcomes()
    assert patched == shipped
    codes = [outcome[1] for outcome in shipped if outcome[0] == "refused"]
    assert codes == ["ConditionalCheckFailedException"] * 3, shipped  # the failing conditions fail (not vacuous)
    assert [o[2] for o in shipped if o[0] == "ok" and o[2] is not None] == [1, 0, 2, 2], shipped  # found and not
    assert len(shipped_lexings) > len(set(shipped_lexings))  # moto lexed each repeated string again
    assert sorted(lexings) == sorted(set(shipped_lexings))  # once per string with the patch


def test_a_string_that_does_not_lex_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_condition_lex_cache(monkeypatch.setattr)
    for _ in range(2):
        with pytest.raises(ValueError, match="Cannot parse condition"):
            ConditionExpressionParser("attempts = :n !! junk", {}, {":n": {"N": "0"}})._lex_condition_expression()


def test_each_call_gets_its_own_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_condition_lex_cache(monkeypatch.setattr)
    parser = ConditionExpressionParser("#s = :v AND attribute_exists(job_id)", {"#s": "status"}, {":v": {"S": "x"}})
    first, second = parser._lex_condition_expression(), parser._lex_condition_expression()
    assert list(first) == list(second)
    assert all(a is not b and a.children is not b.children for a, b in zip(first, second, strict=True))
