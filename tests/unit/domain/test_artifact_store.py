"""ArtifactStore.size reads S3 as AWS answers: 404 is "missing", 403 is never "missing" (issue 9, defect 3)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.stub import Stubber

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.errors import ArtifactAccessDenied
from omnireel.s3uri import S3Uri

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
