"""DynamoDB: transactions isolated per item, every request answered from a consistent item, and the throttle hook."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from .. import fault_injection
from .cards import FAULT_HOOK, MOTO_BUG, Context, Patch


def install_transactions(ctx: Context) -> None:
    _patch_dynamodb_transactions()


def install_atomic_requests(ctx: Context) -> None:
    patch_dynamodb_atomic_requests()


def install_fault_hook(ctx: Context) -> None:
    patch_dynamodb_fault_hook()


_DYNAMODB_LOCK = threading.RLock()


def patch_dynamodb_atomic_requests(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 26 (see ``apply``): each DynamoDB request is handled, its answer serialised, under ``_DYNAMODB_LOCK``."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    if getattr(original, "omnireel_atomic", False):
        return

    def call_action(self: Any) -> Any:
        with _DYNAMODB_LOCK:
            return original(self)

    call_action.omnireel_atomic = True  # type: ignore[attr-defined]
    set_attribute(DynamoHandler, "call_action", call_action)


def patch_dynamodb_fault_hook(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 28 (see ``apply``): DynamoDB item requests consult ``fault_injection.dynamodb_throttle`` first."""
    from moto.dynamodb.exceptions import DynamodbException
    from moto.dynamodb.responses import DynamoHandler

    for action in ("get_item", "put_item", "update_item", "delete_item", "query", "transact_write_items"):
        original = getattr(DynamoHandler, action)
        if getattr(original, "omnireel_fault_hook", False):
            continue

        def hooked(self: Any, _original: Any = original) -> Any:
            if not fault_injection.dynamodb_throttle_armed():
                return _original(self)
            raw = self.body
            body = raw.decode(errors="replace") if isinstance(raw, bytes) else raw if isinstance(raw, str) else ""
            body = body or json.dumps(raw, default=str)
            if fault_injection.dynamodb_throttle(body):
                raise DynamodbException(
                    "ProvisionedThroughputExceededException",
                    "The level of configured provisioned throughput for the table was exceeded (injected)",
                )
            return _original(self)

        hooked.omnireel_fault_hook = True  # type: ignore[attr-defined]
        set_attribute(DynamoHandler, action, hooked)


def _patch_dynamodb_transactions() -> None:
    """Patch 16 (see ``apply``)."""
    import copy

    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )
    from moto.dynamodb.models import DynamoDBBackend

    lock = _DYNAMODB_LOCK

    def serialised(original: Callable[..., Any]) -> Callable[..., Any]:
        def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return original(self, *args, **kwargs)

        return locked

    for name in ("put_item", "update_item", "delete_item"):
        setattr(DynamoDBBackend, name, serialised(getattr(DynamoDBBackend, name)))

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        with lock:
            seen: set[tuple[str, str]] = set()
            plan: list[tuple[str, dict[str, Any], dict[str, Any], Any]] = []
            errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
            for entry in transact_items:
                if len(entry) > 1:
                    raise TransactWriteSingleOpException
                op_type, op = next(iter(entry.items()))
                if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                    raise ValueError("Unsupported transaction operation")
                table = self.get_table(op["TableName"])
                if op_type == "Put":
                    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                    if table.range_key_attr is not None:
                        key[table.range_key_attr] = op["Item"][table.range_key_attr]
                else:
                    key = op["Key"]
                identity = (op["TableName"], json.dumps(key, sort_keys=True))
                if identity in seen:
                    raise MultipleTransactionsException()
                seen.add(identity)
                current = self.get_item(op["TableName"], key)
                condition = op.get("ConditionExpression")
                names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                if condition is not None and not get_filter_expression(condition, names, values).expr(current):
                    old = current.to_json()["Attributes"] if current is not None and (
                        op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                    ) else None  # fmt: skip
                    errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
                else:
                    errors.append((None, None, None))
                plan.append((op_type, op, key, copy.deepcopy(current)))
            if any(code is not None for code, _, _ in errors):
                raise TransactionCanceledException(errors)
            applied: list[tuple[str, dict[str, Any], Any]] = []
            try:
                for op_type, op, key, before in plan:
                    names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                    if op_type == "Put":
                        self.put_item(op["TableName"], op["Item"])
                    elif op_type == "Delete":
                        self.delete_item(op["TableName"], key)
                    elif op_type == "Update":
                        self.update_item(op["TableName"], key, op["UpdateExpression"], names, values)
                    applied.append((op["TableName"], key, before))
            except Exception:
                for table_name, key, before in reversed(applied):
                    if before is None:
                        self.delete_item(table_name, key)
                    else:
                        self.put_item(table_name, before.to_json()["Attributes"])
                raise

    DynamoDBBackend.transact_write_items = transact_write_items


CARDS = [
    Patch(
        "16",
        "TransactWriteItems isolated per item",
        aws="A transaction is atomic and isolated per item; a failed condition writes nothing and loses nothing.",
        moto="Deep-copies every table a transaction touches and restores the copies when a condition fails, "
        'discarding other requests\' writes made meanwhile (or fails with "dictionary changed size").',
        test="tests/unit/local/test_dynamodb_transactions.py::test_concurrent_transactions_count_exactly_once_and_lose_no_writes",
        upstream=MOTO_BUG,
        installs=install_transactions,
    ),
    Patch(
        "26",
        "Every DynamoDB request answered from a consistent item",
        aws="A read answers from a consistent item.",
        moto="Serialises the live stored item after the backend call, while a concurrent UpdateItem may change it "
        '(a 500: "dictionary changed size during iteration").',
        test="tests/unit/local/test_dynamodb_atomic_requests.py::test_reads_serialise_their_answer_under_the_write_lock",
        upstream=MOTO_BUG,
        installs=install_atomic_requests,
    ),
    Patch(
        "28",
        "Throttle hook on DynamoDB requests (off by default)",
        aws="(A platform fault: ProvisionedThroughputExceededException from a hot partition.)",
        moto="No way to inject it.",
        test="tests/unit/local/test_dynamodb_fault_hook.py::test_matching_requests_are_throttled_count_times",
        upstream=FAULT_HOOK,
        installs=install_fault_hook,
    ),
]
