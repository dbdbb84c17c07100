"""EventPublisher turns SNS/EventBridge failures into PublishFailed for every kind of event it carries."""

from __future__ import annotations

import json

import pytest
from botocore.stub import Stubber

from omnireel.aws import clients
from omnireel.aws.event_publisher import EventPublisher
from omnireel.core.errors import PublishFailed
from omnireel.events.job_events import ArtifactLink, ImageArtifacts, ImageReadyEvent


@pytest.fixture
def publisher(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.client.cache_clear()
    yield EventPublisher("arn:aws:sns:us-east-1:123456789012:events")
    clients.client.cache_clear()


def test_a_failed_image_ready_publish_is_a_publish_failed_naming_the_job(publisher: EventPublisher) -> None:
    """Regression: the error message read ``event.batch_id`` for every non-terminal event, so a failed
    job.image_ready publish raised AttributeError instead of the retryable PublishFailed."""
    link = ArtifactLink(s3_uri="s3://b/k", url="https://b/k", expires_at="2026-12-01T01:00:00Z")
    event = ImageReadyEvent(
        event_id="e1", occurred_at="2026-12-01T00:00:00Z", job_id="job-1", status="generating_image", prompt=None,
        request=None, source="api", artifacts=ImageArtifacts(image=link),
    )  # fmt: skip
    with Stubber(publisher._sns) as sns:
        sns.add_client_error("publish", service_error_code="InternalError", http_status_code=500)
        with pytest.raises(PublishFailed, match=r"job\.image_ready for job job-1"):
            publisher.publish(event)


def test_a_prompt_with_characters_sqs_refuses_is_published_escaped_and_reads_back_the_same(
    publisher: EventPublisher,
) -> None:
    """A raw U+FFFE or U+FFFF in a prompt (valid JSON, valid UTF-8) made the job's event a body SNS's SQS subscribers
    refuse (InvalidMessageContents): the webhook and batch queues never got it, and a batch line's job ended without
    its one terminal event (found when the reconciler began sending missing events: ``tests/e2e/
    test_batch_characters.py`` stopped completing). Published JSON-escaped: the same value, every character allowed."""
    from omnireel.core.sqs_text import _OUTSIDE_SQS_SET

    prompt = "a paper lantern \ufffe at dusk \uffff"
    event = ImageReadyEvent(
        event_id="e2", occurred_at="2026-12-01T00:00:00Z", job_id="job-2", status="generating_image", prompt=prompt,
        request=None, source="api", artifacts=None,
    )  # fmt: skip
    sent: dict[str, str] = {}
    with Stubber(publisher._sns) as sns, Stubber(publisher._events) as events:
        sns.add_response("publish", {"MessageId": "m"})
        events.add_response("put_events", {"FailedEntryCount": 0, "Entries": [{"EventId": "x"}]})
        sns.client.meta.events.register(
            "before-parameter-build.sns.Publish", lambda params, **_: sent.update(sns=params["Message"])
        )
        events.client.meta.events.register(
            "before-parameter-build.eventbridge.PutEvents",
            lambda params, **_: sent.update(bus=params["Entries"][0]["Detail"]),
        )
        publisher.publish(event)
    for body in sent.values():
        assert not _OUTSIDE_SQS_SET.search(body), body
        assert json.loads(body)["prompt"] == prompt
    assert set(sent) == {"sns", "bus"}
