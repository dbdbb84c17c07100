"""template.yaml's buckets, topics, queues and tables as deployed: lifecycle and versioning of the buckets, encryption
at rest everywhere, TLS only."""

from __future__ import annotations

from typing import Any

from tests.unit.template.helpers import of_type, props


# ---------------------------------------------------------------- 5. lifecycle
def test_artifacts_bucket_lifecycle_rules(cfn: dict[str, Any]) -> None:
    rules = {r["Prefix"]: r for r in props(cfn, "ArtifactsBucket")["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {"jobs/", "async/outputs/", "async/failures/"}
    assert rules["jobs/"]["ExpirationInDays"] == {"Ref": "JobArtifactDays"}
    assert rules["async/outputs/"]["ExpirationInDays"] == {"Ref": "AsyncOutputDays"}
    assert rules["async/failures/"]["ExpirationInDays"] == {"Ref": "AsyncFailureDays"}
    for rule in rules.values():
        assert rule["Status"] == "Enabled"
        assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}


def test_inbox_bucket_is_versioned_and_expires_every_version(cfn: dict[str, Any]) -> None:
    inbox = props(cfn, "InboxBucket")
    assert inbox["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {r["Id"]: r for r in inbox["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {"expire-prompts", "remove-expired-delete-markers"}
    prompts = rules["expire-prompts"]
    assert (prompts["Prefix"], prompts["ExpirationInDays"]) == ("prompts/", {"Ref": "InboxPromptDays"})
    assert prompts["NoncurrentVersionExpiration"] == {"NoncurrentDays": {"Ref": "InboxPromptDays"}}
    assert rules["remove-expired-delete-markers"]["ExpiredObjectDeleteMarker"] is True
    assert all(r["Status"] == "Enabled" and r["Prefix"] == "prompts/" for r in rules.values())


# ---------------------------------------------------------------- 7. security
def test_encryption_everywhere(cfn: dict[str, Any]) -> None:
    for name, bucket in of_type(cfn, "AWS::S3::Bucket").items():
        p = bucket["Properties"]
        (rule,) = p["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}, name
        assert all(p["PublicAccessBlockConfiguration"][k] is True for k in (
            "BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"))  # fmt: skip
    for name, topic in of_type(cfn, "AWS::SNS::Topic").items():
        assert topic["Properties"].get("KmsMasterKeyId"), name
    for name, queue in of_type(cfn, "AWS::SQS::Queue").items():
        assert queue["Properties"].get("SqsManagedSseEnabled") or queue["Properties"].get("KmsMasterKeyId"), name
    for name, table in of_type(cfn, "AWS::DynamoDB::Table").items():
        assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True, name
    assert props(cfn, "AlarmTopicKey")["EnableKeyRotation"] is True


def test_buckets_deny_insecure_transport(cfn: dict[str, Any]) -> None:
    policies = {
        p["Properties"]["Bucket"]["Ref"]: p["Properties"] for p in of_type(cfn, "AWS::S3::BucketPolicy").values()
    }
    assert set(policies) == set(of_type(cfn, "AWS::S3::Bucket"))
    for bucket, policy in policies.items():
        (deny,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, bucket
