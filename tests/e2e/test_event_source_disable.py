"""A queue consumer paused through the Lambda API (patch 15b): ``UpdateEventSourceMapping Enabled=false`` stops the
local pollers of the mapping, its ``State`` reads ``Disabled`` once no receive is under way, events then wait in the
queue, and ``Enabled=true`` delivers them. The developer pauses the webhook delivery function's mapping, as an
operator may on AWS (an incident on a receiver, a queue attribute to change)."""

from __future__ import annotations

import json

import pytest

from bench.localstack import consumer_paused
from tests.support.frontdoor import developer_door
from tests.support.stack import LocalStack

from .helpers import aws_client, wait_for
from .test_webhook_delivery import _listener, _stop, _submit_and_end, _webhook_queue

pytestmark = pytest.mark.e2e


def test_a_disabled_mapping_receives_nothing_until_it_is_enabled_again(stack: LocalStack) -> None:
    from omnireel_local.home import free_port

    functions, sqs, queue = aws_client(stack, "lambda"), aws_client(stack, "sqs"), _webhook_queue(stack)
    (function,) = [
        f["FunctionName"] for f in functions.list_functions()["Functions"] if "WebhookDelivery" in f["FunctionName"]
    ]  # fmt: skip
    port = free_port()
    process, reader = _listener(stack, port)
    try:
        with consumer_paused(functions, function) as mapping:
            assert functions.get_event_source_mapping(UUID=mapping["UUID"])["State"] == "Disabled"
            door = developer_door(stack.state())
            job_id = _submit_and_end(door, "held while the consumer is paused", f"http://127.0.0.1:{port}/paused")

            def visible() -> int:
                names = ["ApproximateNumberOfMessages"]
                return int(sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"][names[0]])

            # The job's terminal event reaches the queue and stays visible: no poller receives it (an enabled mapping
            # takes a message within milliseconds of its arrival, its pollers being inside a long poll).
            wait_for(lambda: visible() >= 1, 60, "the job's event to wait in the webhook queue")
            assert functions.get_event_source_mapping(UUID=mapping["UUID"])["State"] == "Disabled"
        assert functions.get_event_source_mapping(UUID=mapping["UUID"])["State"] == "Enabled"
        got = reader.wait_for_json(lambda d: d["event"].get("job_id") == job_id, timeout=60)
    finally:
        _stop(process)
    assert got is not None, "the held event was not delivered once the mapping was enabled again"
    assert got["path"] == "/paused", json.dumps(got)
