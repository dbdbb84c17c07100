"""ArtifactStore.size reads S3 as AWS answers: 404 is "missing", 403 is never "missing" (issue 9, defect 3)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.stub import Stubber

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.core.errors import ArtifactAccessDenied
from omnireel.core.s3uri import S3Uri

URI = S3Uri("artifacts", "async/7f.out")


@pytest.fixture
def store() -> Iterator[tuple[ArtifactStore, Stubber]]:
    artifacts = ArtifactStore("artifacts")
    with Stubber(artifacts._s3) as stub:  # the client is shared per process: deactivate after each test
        yield artifacts, stub


def test_a_404_means_the_object_does_not_exist(store: tuple[ArtifactStore, Stubber]) -> None:
    artifacts, stub = store
    stub.add_client_error("head_object", service_error_code="404", http_status_code=404)
    assert artifacts.size(URI) is None
    stub.assert_no_pending_responses()


@pytest.mark.parametrize("code", ["403", "AccessDenied", "Forbidden"])
def test_a_403_is_never_read_as_missing(store: tuple[ArtifactStore, Stubber], code: str) -> None:
    artifacts, stub = store
    stub.add_client_error("head_object", service_error_code=code, http_status_code=403)
    with pytest.raises(ArtifactAccessDenied) as raised:
        artifacts.size(URI)
    assert "s3:ListBucket" in raised.value.message and str(URI) in raised.value.message
    assert raised.value.code == "ArtifactAccessDenied" and not raised.value.retryable


# read_head: the size and the first block in one ranged GET (async_result's MP4 check, issue 11 item 3).
def test_read_head_returns_the_first_bytes_and_the_whole_size(store: tuple[ArtifactStore, Stubber]) -> None:
    import io

    from botocore.response import StreamingBody

    artifacts, stub = store
    body = b"\x00\x00\x00\x18ftypisom"
    stub.add_response(
        "get_object",
        {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentRange": "bytes 0-11/250000"},
        {"Bucket": "artifacts", "Key": "async/7f.out", "Range": "bytes=0-65535"},
    )
    assert artifacts.read_head(URI, 65536) == (body, 250000)
    stub.assert_no_pending_responses()


def test_read_head_of_a_missing_object_is_none_and_a_403_is_never_missing(
    store: tuple[ArtifactStore, Stubber],
) -> None:
    artifacts, stub = store
    stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404)
    assert artifacts.read_head(URI, 65536) is None
    stub.add_client_error("get_object", service_error_code="AccessDenied", http_status_code=403)
    with pytest.raises(ArtifactAccessDenied) as raised:
        artifacts.read_head(URI, 65536)
    assert "GetObject" in raised.value.message and "s3:ListBucket" in raised.value.message


def test_read_head_of_an_empty_object_is_empty(store: tuple[ArtifactStore, Stubber]) -> None:
    """S3 cannot satisfy a range on a 0-byte object (416 InvalidRange): nothing to read, size 0."""
    artifacts, stub = store
    stub.add_client_error("get_object", service_error_code="InvalidRange", http_status_code=416)
    assert artifacts.read_head(URI, 65536) == (b"", 0)
