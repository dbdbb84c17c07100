"""The inbox adapter: it asks S3 for exactly the event's version, and maps S3's errors (botocore Stubber)."""

import io

import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from omnireel.aws import clients
from omnireel.aws.inbox_store import InboxStore
from omnireel.core.errors import InvalidRequest, SourceVersionGone
from omnireel.core.s3uri import SourceVersion

VERSIONED = SourceVersion(version_id="3HL4kqtJvjVBH40Nrjfkd", etag="0123456789abcdef0123456789abcdef")
UNVERSIONED = SourceVersion(version_id=None, etag="0123456789abcdef0123456789abcdef")
GET = {"Bucket": "inbox", "Key": "prompts/x.txt", "Range": "bytes=0-65536"}


@pytest.fixture
def s3():
    clients.client.cache_clear()
    store = InboxStore()
    with Stubber(store._s3) as stubber:
        yield store, stubber
    clients.client.cache_clear()


def _body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


@pytest.mark.parametrize(
    ("version", "pinned"),
    [
        (VERSIONED, {"VersionId": "3HL4kqtJvjVBH40Nrjfkd"}),
        (UNVERSIONED, {"IfMatch": '"0123456789abcdef0123456789abcdef"'}),
        (SourceVersion(version_id="null", etag='"abc"'), {"IfMatch": '"abc"'}),  # versioning suspended
    ],
)
def test_reads_exactly_the_version_the_event_names(s3, version, pinned):
    store, stubber = s3
    stubber.add_response("get_object", {"Body": _body(b"a kite")}, {**GET, **pinned})
    assert store.read("inbox", "prompts/x.txt", 65536, version) == b"a kite"


@pytest.mark.parametrize(
    ("code", "status", "version", "fragment"),
    [
        ("NoSuchVersion", 404, VERSIONED, "version 3HL4kqtJvjVBH40Nrjfkd of the file no longer exists"),
        ("NoSuchKey", 404, VERSIONED, "no longer exists"),
        ("MethodNotAllowed", 405, VERSIONED, "no longer exists"),  # the version is a delete marker
        ("NoSuchKey", 404, UNVERSIONED, "the file no longer exists"),
        ("PreconditionFailed", 412, UNVERSIONED, "overwritten before it could be read"),
    ],
)
def test_a_version_that_is_gone_is_a_clear_rejection(s3, code, status, version, fragment):
    store, stubber = s3
    stubber.add_client_error("get_object", code, "gone", status)
    with pytest.raises(SourceVersionGone) as raised:
        store.read("inbox", "prompts/x.txt", 65536, version)
    assert fragment in raised.value.message and raised.value.code == "SourceVersionGone"


def test_a_malformed_version_id_is_an_invalid_event(s3):
    store, stubber = s3
    stubber.add_client_error("get_object", "InvalidArgument", "Invalid version id specified", 400)
    with pytest.raises(InvalidRequest, match="invalid version id"):
        store.read("inbox", "prompts/x.txt", 65536, VERSIONED)


def test_access_denied_is_not_read_as_a_missing_file(s3):
    store, stubber = s3
    stubber.add_client_error("get_object", "AccessDenied", "denied", 403)
    with pytest.raises(ClientError):  # an infrastructure failure: the invocation fails and is retried
        store.read("inbox", "prompts/x.txt", 65536, VERSIONED)


def test_an_empty_object_reads_as_empty(s3):
    store, stubber = s3
    stubber.add_client_error("get_object", "InvalidRange", "no byte 0", 416)
    assert store.read("inbox", "prompts/x.txt", 65536, VERSIONED) == b""


def test_tags_the_exact_version_and_absorbs_failures(s3):
    store, stubber = s3
    tagging = {"TagSet": [{"Key": "omnireel-job-id", "Value": "j"}]}
    stubber.add_response(
        "put_object_tagging",
        {},
        {"Bucket": "inbox", "Key": "prompts/x.txt", "VersionId": "3HL4kqtJvjVBH40Nrjfkd", "Tagging": tagging},
    )
    assert store.tag("inbox", "prompts/x.txt", VERSIONED, {"omnireel-job-id": "j"}) is True
    stubber.add_client_error("put_object_tagging", "AccessDenied", "denied", 403)
    assert store.tag("inbox", "prompts/x.txt", UNVERSIONED, {"omnireel-job-id": "j"}) is False
