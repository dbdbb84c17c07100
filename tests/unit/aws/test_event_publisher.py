"""EventPublisher turns SNS/EventBridge failures into PublishFailed for every kind of event it carries."""

from __future__ import annotations

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
