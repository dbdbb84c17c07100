"""Issue 29 item 3: one SigV4 verifier (``iam.sigv4``, on botocore's signer) for header auth, presigned URLs
and the front door, with the body hashed as received. Requests are signed here by botocore exactly as a client signs
them, then verified; no network."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

import omnireel_local
from omnireel_local.iam import sigv4

CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
REGION = "us-east-1"


def _signed(auth_class: type, service: str, method: str, url: str, body: bytes, headers: dict[str, str]
            ) -> tuple[list[tuple[str, str]], str, list[str], str]:  # fmt: skip
    request = AWSRequest(method=method, url=url, data=body, headers={"Host": urlsplit(url).netloc, **headers})
    auth_class(CREDENTIALS, service, REGION).add_auth(request)
    authorization = request.headers["Authorization"]
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    return list(request.headers.items()), request.headers["X-Amz-Date"], signed, authorization.rsplit("=", 1)[1]


def _verify(service: str, method: str, url: str, body: bytes, headers, date, signed, payload: str | None) -> str:
    assert payload is not None
    return sigv4.header_signature(method=method, url=url, headers=headers, body=body, signed=signed,
                                  credentials=CREDENTIALS, service=service, region=REGION, amz_date=date,
                                  payload=payload)  # fmt: skip


def test_a_json_service_call_verifies_and_a_changed_body_does_not() -> None:
    url, body = "http://127.0.0.1:4710/", b'{"TableName": "jobs"}'
    headers, date, signed, given = _signed(SigV4Auth, "dynamodb", "POST", url, body,
                                           {"X-Amz-Target": "DynamoDB_20120810.GetItem"})  # fmt: skip
    assert _verify("dynamodb", "POST", url, body, headers, date, signed, sigv4.received_body_hash(body)) == given
    other = body.replace(b"jobs", b"jabs")
    assert _verify("dynamodb", "POST", url, other, headers, date, signed, sigv4.received_body_hash(other)) != given


def test_a_declared_content_hash_counts_for_s3_only_when_it_is_the_received_bodys() -> None:
    url, body = "http://127.0.0.1:4710/bucket/key%20with%20space.txt", b"hello"
    headers, date, signed, given = _signed(S3SigV4Auth, "s3", "PUT", url, body, {})
    declared = dict(headers)["X-Amz-Content-SHA256"]
    assert declared == hashlib.sha256(body).hexdigest()
    assert _verify("s3", "PUT", url, body, headers, date, signed, sigv4.s3_payload_hash(declared, body)) == given
    assert sigv4.s3_payload_hash(declared, b"hellO") is None  # another body than the one declared: refused
    assert sigv4.s3_payload_hash("UNSIGNED-PAYLOAD", b"anything") == "UNSIGNED-PAYLOAD"


def test_the_front_door_hashes_the_body_it_received_whatever_is_declared() -> None:
    url, body = "http://127.0.0.1:4711/jobs", b'{"prompt": "a fox"}'
    claimed = {"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}
    headers, date, signed, given = _signed(SigV4Auth, "execute-api", "POST", url, body, claimed)
    # botocore signed "UNSIGNED-PAYLOAD" as the payload line; API Gateway hashes the body: no match.
    assert _verify("execute-api", "POST", url, body, headers, date, signed, sigv4.received_body_hash(body)) != given


@pytest.mark.parametrize("key", ["out/video.mp4", "prompts/a b+c.txt", "ü/ñ.png"])
def test_a_presigned_url_verifies_and_a_changed_one_does_not(key: str) -> None:
    s3 = boto3.client(
        "s3", region_name=REGION, endpoint_url="http://127.0.0.1:4710", aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key=CREDENTIALS.secret_key, config=Config(signature_version="s3v4"),
    )  # fmt: skip
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "bucket", "Key": key}, ExpiresIn=600)
    query = dict(p.split("=", 1) for p in urlsplit(url).query.split("&"))
    headers = [("Host", "127.0.0.1:4710")]
    verify = lambda u: sigv4.presigned_signature(method="GET", url=u, headers=headers, credentials=CREDENTIALS,  # noqa: E731
                                                  region=REGION)  # fmt: skip
    assert verify(url) == query["X-Amz-Signature"]
    assert verify(url.replace("X-Amz-Expires=600", "X-Amz-Expires=6000")) != query["X-Amz-Signature"]
    assert verify(url.replace("/bucket/", "/other/")) != query["X-Amz-Signature"]


def test_no_module_of_the_local_stack_builds_a_canonical_request_by_hand() -> None:
    """Derived from the code: the SigV4 string to sign and signing-key chain appear in sigv4.py (through botocore)
    and nowhere else."""
    folder = Path(omnireel_local.__file__).parent
    for path in folder.rglob("*.py"):
        text = path.read_text()
        if path.name == "sigv4.py":
            continue
        assert '"AWS4-HMAC-SHA256", ' not in text and 'aws4_request".encode' not in text, path.name
        assert "canonical_request(" not in text and "AWS4{" not in text, path.name
