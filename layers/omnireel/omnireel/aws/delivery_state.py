"""A webhook delivery's state on the record it belongs to (a job, or a batch for ``batch.completed``): one map,
``webhook_deliveries``, event type -> the last attempt's state (``omnireel.webhooks.dispatch``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from omnireel.aws.dynamodb_values import to_attributes


def record_delivery_state(
    ddb: Any,
    table: str,
    key: dict[str, Any],
    id_attribute: str,
    event_type: str,
    state: dict[str, Any],
    still_there: Callable[[], bool],
) -> None:
    """Set ``webhook_deliveries[event_type] = state``, never on a record that is gone (expired or deleted), which the
    update would otherwise create; a record written before webhooks gets the map first. ``still_there``: whether the
    record exists (asked only when the map appeared between the two updates, to set the entry then)."""
    exists = f"attribute_exists({id_attribute})"
    try:
        ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET webhook_deliveries.#type = :state",
            ConditionExpression=f"{exists} AND attribute_exists(webhook_deliveries)",
            ExpressionAttributeNames={"#type": event_type},
            ExpressionAttributeValues=to_attributes({":state": state}),
        )
        return
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
    try:
        ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET webhook_deliveries = :map",
            ConditionExpression=f"{exists} AND attribute_not_exists(webhook_deliveries)",
            ExpressionAttributeValues=to_attributes({":map": {event_type: state}}),
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        if still_there():  # the map appeared meanwhile: set the entry
            record_delivery_state(ddb, table, key, id_attribute, event_type, state, still_there)
