"""Tear a deployed omnireel stack down completely: empty its buckets, ``sam delete`` it, report what went away.

CloudFormation cannot delete a non-empty bucket, so ``sam delete`` alone fails on a stack that has run jobs. This
script (run by ``make destroy STACK=name REGION=r [CONFIRM=yes]``; never by ``make test``):

1. lists the stack's resources and the buckets it owns (its AWS::S3::Bucket resources and bucket outputs),
2. asks for confirmation (``--yes`` skips it),
3. deletes every object version and delete marker in those buckets - unless the stack was deployed with
   ``RetainData=true`` (the prod profile): then the resources whose DeletionPolicy follows RetainData (the buckets,
   the tables, the webhook signing key: read from template.yaml) are retained, so their data is left untouched and
   listed as what outlives the stack,
4. runs ``sam delete --no-prompts`` (which waits for the stack deletion),
5. deletes the endpoints' container log groups (``/aws/sagemaker/Endpoints/<name>``: SageMaker creates them, the
   stack does not own them), and
6. checks that the stack's endpoints, ECS service and load balancer are gone, and reports.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import boto3
from botocore.exceptions import ClientError

from omnireel_template import retained_by_retain_data

BILLABLE = {
    "AWS::SageMaker::Endpoint": "endpoint",
    "AWS::ECS::Service": "ECS service",
    "AWS::ElasticLoadBalancingV2::LoadBalancer": "load balancer",
}


def stack_resources(cfn: Any, stack: str) -> list[dict[str, str]]:
    pages = cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
    return [r for page in pages for r in page["StackResourceSummaries"]]


def owned_buckets(cfn: Any, stack: str, resources: list[dict[str, str]]) -> list[str]:
    names = {r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::S3::Bucket"}
    outputs = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    names |= {o["OutputValue"] for o in outputs if o["OutputKey"].endswith("BucketName")}
    return sorted(n for n in names if n)


def retains_data(cfn: Any, stack: str) -> bool:
    """True if the stack's data resources are retained on deletion (parameter RetainData=true). A stack deployed
    before the parameter existed has none and deletes them (the old DeletionPolicy default)."""
    parameters = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Parameters", [])
    values = {p["ParameterKey"]: p.get("ResolvedValue", p.get("ParameterValue")) for p in parameters}
    return values.get("RetainData", "false") == "true"


def empty_bucket(s3: Any, bucket: str) -> int:
    """Delete every object version and delete marker; returns how many were deleted.

    Lists from the start again after each deleted page: paginating on while deleting would resume after a version
    marker that no longer exists (moto then lists nothing more, and the bucket would be left with versions).
    """
    deleted = 0
    previous: list[dict[str, str]] = []
    try:
        while True:
            page = s3.list_object_versions(Bucket=bucket, MaxKeys=1000)
            keys = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if not keys:
                return deleted
            if keys == previous:
                raise RuntimeError(f"{bucket}: versions are not going away (object lock?): {keys[:3]}")
            result = s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            if result.get("Errors"):
                raise RuntimeError(f"{bucket}: could not delete {result['Errors'][:3]}")
            deleted += len(keys)
            previous = keys
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchBucket":
            return deleted
        raise


def still_there(session: Any, resource: dict[str, str]) -> bool:
    kind, physical = resource["ResourceType"], resource["PhysicalResourceId"]
    try:
        if kind == "AWS::SageMaker::Endpoint":
            name = physical.rsplit("/", 1)[-1]
            session.client("sagemaker").describe_endpoint(EndpointName=name)
            return True
        if kind == "AWS::ECS::Service":
            cluster = physical.split("/")[-2]
            services = session.client("ecs").describe_services(cluster=cluster, services=[physical])["services"]
            return any(s["status"] != "INACTIVE" for s in services)
        if kind == "AWS::ElasticLoadBalancingV2::LoadBalancer":
            session.client("elbv2").describe_load_balancers(LoadBalancerArns=[physical])
            return True
    except ClientError:
        return False
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--region")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--sam", default="sam", help="the sam executable")
    args = parser.parse_args(argv)

    session = boto3.Session(region_name=args.region)
    region = session.region_name
    if not region:
        print("no region: pass REGION=... (or set AWS_REGION)", file=sys.stderr)
        return 2
    cfn = session.client("cloudformation")
    try:
        resources = stack_resources(cfn, args.stack)
    except ClientError as exc:
        print(f"stack {args.stack} in {region}: {exc.response['Error']['Message']}", file=sys.stderr)
        return 1
    buckets = owned_buckets(cfn, args.stack, resources)
    billable = [r for r in resources if r["ResourceType"] in BILLABLE]
    keeps = retained_by_retain_data() if retains_data(cfn, args.stack) else set()
    retained = [r for r in resources if r["LogicalResourceId"] in keeps]
    if retained:
        buckets = []  # retained buckets keep their data: emptying them would defeat RetainData

    print(f"stack {args.stack} in {region}: {len(resources)} resources")
    for r in billable:
        print(f"  {BILLABLE[r['ResourceType']]:<14} {r['PhysicalResourceId']}")
    for b in buckets:
        print(f"  bucket (to empty) {b}")
    for r in retained:
        print(f"  retained (RetainData=true, left with its data) {r['ResourceType']} {r['PhysicalResourceId']}")
    if not args.yes:
        question = f"Delete ALL objects in {len(buckets)} bucket(s) and the stack {args.stack}? Type the stack name: "
        answer = input(question)
        if answer.strip() != args.stack:
            print("aborted; nothing was changed")
            return 1

    s3 = session.client("s3")
    for b in buckets:
        print(f"==> emptying s3://{b}: {empty_bucket(s3, b)} object version(s) deleted")

    print(f"==> sam delete --stack-name {args.stack} --region {region} --no-prompts")
    done = subprocess.run(
        [args.sam, "delete", "--stack-name", args.stack, "--region", region, "--no-prompts"], check=False
    )
    if done.returncode != 0:
        print("sam delete failed; see above (docs/operations.md, Cleanup)", file=sys.stderr)
        return done.returncode

    logs = session.client("logs")
    for r in resources:
        if r["ResourceType"] == "AWS::SageMaker::Endpoint":
            group = f"/aws/sagemaker/Endpoints/{r['PhysicalResourceId'].rsplit('/', 1)[-1]}"
            try:
                logs.delete_log_group(logGroupName=group)
                print(f"==> deleted log group {group}")
            except ClientError:
                pass

    left = [r for r in billable if still_there(session, r)]
    print(f"removed: stack {args.stack} ({len(resources)} resources), emptied {len(buckets)} bucket(s)")
    for r in billable:
        state = "STILL PRESENT" if r in left else "gone"
        print(f"  {BILLABLE[r['ResourceType']]:<14} {r['PhysicalResourceId']}: {state}")
    if left:
        print("some billable resources remain: see docs/operations.md, Cleanup", file=sys.stderr)
        return 1
    if retained:
        print(f"retained on purpose (RetainData=true): {len(retained)} resource(s) listed above keep their data; "
              "delete them by hand if you really mean to (docs/operations.md, Cleanup)")  # fmt: skip
    print("nothing billable from this stack remains (the shared SAM artifacts bucket is kept; see docs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
