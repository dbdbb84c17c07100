"""Artifact links are SigV4 presigned URLs on the regional virtual-hosted S3 endpoint (omnireel.aws.clients)."""

from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import requests
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.artifact_store import ArtifactStore
from omnireel.core.s3uri import S3Uri


@pytest.fixture
def fresh_clients(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    clients.client.cache_clear()
    yield
    clients.client.cache_clear()


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_presigned_urls_are_sigv4_on_the_regional_endpoint(
    region: str, fresh_clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    with mock_aws():
        store = ArtifactStore("omnireel-artifacts")
        url, expires_at = store.presign(S3Uri("omnireel-artifacts", "jobs/j/image.png"), 900)
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    assert parts.scheme == "https" and parts.netloc == f"omnireel-artifacts.s3.{region}.amazonaws.com"
    assert parts.path == "/jobs/j/image.png"
    assert "AWSAccessKeyId" not in query and "Signature" not in query
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Credential"][0].endswith(f"/{region}/s3/aws4_request")
    assert query["X-Amz-Expires"] == ["900"]
    assert query["X-Amz-SignedHeaders"] == ["host"]
    assert expires_at.endswith("Z")


def test_a_presigned_url_downloads_from_the_local_endpoint(fresh_clients) -> None:
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="art")
        store = ArtifactStore("art")
        store.put("jobs/j/a.txt", b"hello", "text/plain")
        url, _ = store.presign(S3Uri("art", "jobs/j/a.txt"), 60)
        assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url
        assert requests.get(url, timeout=10).content == b"hello"
