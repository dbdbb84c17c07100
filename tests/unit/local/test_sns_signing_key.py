"""moto patch 20: SNS signs every subscription's messages with one key (AWS: one signing certificate per region)
instead of generating a new RSA key per subscription; the signatures still verify."""

from __future__ import annotations

import base64
import json

import boto3
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from omnireel_local.patches.speed import patch_sns_signing_key

REGION = "us-east-1"


def deliveries(queues: int) -> list[dict]:
    sns = boto3.client("sns", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="job-events")["TopicArn"]
    urls = []
    for i in range(queues):
        url = sqs.create_queue(QueueName=f"consumer-{i}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        urls.append(url)
    sns.publish(TopicArn=topic, Message="first")
    sns.publish(TopicArn=topic, Message="second")
    out = []
    for url in urls:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        out += [json.loads(m["Body"]) for m in messages]
    return out


def public_key_numbers(delivery: dict) -> tuple[int, int]:
    """The numbers of the key that signed ``delivery`` (its certificate, as the SigningCertURL serves it), after
    checking the signature with it."""
    name = delivery["SigningCertURL"].rsplit("/", 1)[1]
    pem = sns_backends[DEFAULT_ACCOUNT_ID][REGION]._message_public_keys[name]
    key = x509.load_pem_x509_certificate(pem).public_key()
    signed = "".join(
        f"{field}\n{delivery[field]}\n" for field in ("Message", "MessageId", "Timestamp", "TopicArn", "Type")
    )
    key.verify(base64.b64decode(delivery["Signature"]), signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    numbers = key.public_numbers()
    return numbers.n, numbers.e


def test_every_subscription_signs_with_one_key_and_the_signatures_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_sns_signing_key(monkeypatch.setattr)
        received = deliveries(queues=3)
        assert len(received) == 6 and {d["Message"] for d in received} == {"first", "second"}
        keys = {public_key_numbers(d) for d in received}
    assert len(keys) == 1, f"{len(keys)} signing keys for 3 subscriptions"


def test_the_key_is_the_processs_across_applications_of_the_patch() -> None:
    """The in-process harnesses apply the patch per test (monkeypatch, undone after): a new 2048-bit key each time
    cost ~0.1 CPU-s a test. The key is made once per process, as the local stack's one."""
    seen = set()
    for _ in range(2):
        with pytest.MonkeyPatch.context() as patch, mock_aws():
            patch_sns_signing_key(patch.setattr)
            seen |= {public_key_numbers(d) for d in deliveries(queues=1)}
    assert len(seen) == 1, "a new signing key for each application of the patch"
