"""Issue 33 item 7: POST /batches/uploads' reservation and key rules (``batches.uploads``, ``aws.batch_uploads``),
against moto's DynamoDB and S3. The whole path (presign, a plain-HTTP PUT, the batch owned by its caller) is
tests/e2e/test_batch_uploads.py."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.batch_uploads import BatchUploads
from omnireel.batches.batch import MAX_FILE_BYTES, batch_id_for
from omnireel.batches.uploads import UPLOAD_SECONDS, owner_digest, start_upload, upload_of
from omnireel.core.errors import InvalidRequest

ALICE = "arn:aws:iam::123456789012:user/alice"


@pytest.fixture
def uploads(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.client.cache_clear()
        clients._session.cache_clear()
        boto3.client("dynamodb").create_table(
            TableName="batches", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "batch_id", "AttributeType": "S"},
                                  {"AttributeName": "item", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "batch_id", "KeyType": "HASH"}, {"AttributeName": "item", "KeyType": "RANGE"}],
        )  # fmt: skip
        yield BatchUploads("batches", "inbox")
        clients.client.cache_clear()
        clients._session.cache_clear()


def test_an_upload_is_reserved_for_its_caller_before_its_url_exists(uploads: BatchUploads) -> None:
    answer = start_upload(owner=ALICE, owner_arn=ALICE, size=1234, webhook=None, uploads=uploads)
    url = urlsplit(answer["upload"]["url"])  # type: ignore[index]
    key = url.path.lstrip("/").removeprefix("inbox/")  # virtual-hosted (AWS) or path-style (a custom endpoint)
    assert key == f"prompts/uploads/{owner_digest(ALICE)}/{answer['upload_id']}.jsonl"
    query = parse_qs(url.query)
    assert query["X-Amz-Expires"] == [str(UPLOAD_SECONDS)] and "content-length" in query["X-Amz-SignedHeaders"][0]
    found = upload_of(key, uploads)
    assert (found.owner, found.owner_arn, found.size, found.batch_id) == (ALICE, ALICE, 1234, answer["batch_id"])
    assert found.batch_id == batch_id_for(found.natural_key) and found.natural_key.startswith(f"api:{ALICE}:upload:")


@pytest.mark.parametrize("size", [0, -1, MAX_FILE_BYTES + 1, "12", 1.5, True, None])
def test_a_size_outside_1_to_10_mb_is_refused(uploads: BatchUploads, size: object) -> None:
    with pytest.raises(InvalidRequest, match="size"):
        start_upload(owner=ALICE, size=size, webhook=None, uploads=uploads)


def test_a_key_nobody_reserved_names_no_owner(uploads: BatchUploads) -> None:
    answer = start_upload(owner=ALICE, size=10, webhook=None, uploads=uploads)
    forged = [
        f"prompts/uploads/{owner_digest('arn:aws:iam::123456789012:user/mallory')}/{answer['upload_id']}.jsonl",
        f"prompts/uploads/{owner_digest(ALICE)}/00000000-0000-4000-8000-000000000000.jsonl",
        f"prompts/uploads/{owner_digest(ALICE)}/{answer['upload_id']}.txt",
        "prompts/uploads/x.jsonl",
    ]
    for key in forged:
        with pytest.raises(InvalidRequest, match="no upload was reserved"):
            upload_of(key, uploads)
