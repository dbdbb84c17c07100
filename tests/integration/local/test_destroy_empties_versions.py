"""`make destroy` empties versioned buckets: every version and delete marker goes, so CloudFormation can delete them."""

from __future__ import annotations

import boto3
from moto import mock_aws

from scripts.destroy_stack import empty_bucket


@mock_aws
def test_every_version_and_delete_marker_is_deleted() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="inbox")
    s3.put_bucket_versioning(Bucket="inbox", VersioningConfiguration={"Status": "Enabled"})
    for body in (b"a", b"b", b"c"):
        s3.put_object(Bucket="inbox", Key="prompts/x.txt", Body=body)
    s3.delete_object(Bucket="inbox", Key="prompts/x.txt")  # a delete marker on top of three versions
    for i in range(1005):  # more than one DeleteObjects batch
        s3.put_object(Bucket="inbox", Key=f"prompts/{i}.txt", Body=b"p")
    assert empty_bucket(s3, "inbox") == 3 + 1 + 1005
    listing = s3.list_object_versions(Bucket="inbox")
    assert not listing.get("Versions") and not listing.get("DeleteMarkers")
    s3.delete_bucket(Bucket="inbox")  # what CloudFormation does next: it fails on a bucket with versions left
