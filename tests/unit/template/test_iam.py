"""template.yaml's permissions as deployed: the API takes IAM callers, no statement allows a wildcard action, ``*``
resources only where AWS requires them, each function's role names exactly what it touches (indexes instead of scans,
one topic, its own executions, the prefixes it heads), and every security-scanner waiver gives its reason."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.template.helpers import of_type, props


def test_api_uses_iam_auth(sam: dict[str, Any]) -> None:
    auth = props(sam, "HttpApi")["Auth"]
    assert auth["DefaultAuthorizer"] == "AWS_IAM"


def _identity_statements(cfn: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, role in of_type(cfn, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            found += [(name, s) for s in policy["PolicyDocument"]["Statement"]]
    return found


def test_no_iam_statement_allows_a_wildcard_action(cfn: dict[str, Any]) -> None:
    statements = _identity_statements(cfn)
    assert len(statements) > 20
    for role, statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            assert "*" not in action, f"{role}: {action}"
    # SAM attaches exactly these two AWS-managed policies (logs and X-Ray writes; no wildcard actions); nothing broader.
    sam_defaults = {
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
    }
    for name, role in of_type(cfn, "AWS::IAM::Role").items():
        managed = {
            arn if isinstance(arn, str) else arn.get("Fn::Sub", "")
            for arn in role["Properties"].get("ManagedPolicyArns", [])
        }
        assert managed <= sam_defaults, f"{name}: {managed - sam_defaults}"


def test_star_resources_only_where_aws_requires_them(cfn: dict[str, Any]) -> None:
    allowed = {
        "ecr:GetAuthorizationToken",
        "states:SendTaskHeartbeat",
        "states:SendTaskSuccess",
        "states:SendTaskFailure",
        "cloudwatch:PutMetricData",
        "logs:CreateLogDelivery",  # Step Functions log delivery: account-level actions
        "logs:GetLogDelivery",
        "logs:UpdateLogDelivery",
        "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "logs:DescribeResourcePolicies",
        "logs:DescribeLogGroups",
        "xray:PutTraceSegments",  # SAM's Tracing: Active
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:GetSamplingStatisticSummaries",
    }
    for role, statement in _identity_statements(cfn):
        if statement.get("Resource") == "*" and statement["Effect"] == "Allow":
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert set(actions) <= allowed, f"{role}: {actions}"


def test_checkov_waivers_carry_a_reason(sam: dict[str, Any]) -> None:
    waived = 0
    for name, resource in sam["Resources"].items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert re.fullmatch(r"CKV2?_AWS_\d+", skip["id"]), name
            assert len(skip["comment"]) > 20, f"{name} {skip['id']}: give a reason"
            waived += 1
    assert waived > 0


def test_inbox_function_reads_and_tags_exact_versions_under_prompts_only(cfn: dict[str, Any]) -> None:
    role = next(n for n, r in of_type(cfn, "AWS::IAM::Role").items() if n.startswith("InboxFunction"))
    s3 = [s for r, s in _identity_statements(cfn) if r == role and any("s3:" in a for a in s["Action"])]
    assert [sorted(s["Action"]) for s in s3] == [["s3:GetObjectVersion", "s3:PutObjectVersionTagging"]]
    resource = s3[0]["Resource"]["Fn::Sub"]
    assert resource.endswith("-inbox-${AWS::AccountId}-${AWS::Region}/prompts/*"), resource


def test_open_jobs_index_is_sparse_and_the_sweeper_may_only_query_it(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    from omnireel.aws.job_store import OPEN_JOBS_INDEX

    table = props(cfn, "JobsTable")
    (index,) = [i for i in table["GlobalSecondaryIndexes"] if i["IndexName"] == OPEN_JOBS_INDEX]
    assert index["KeySchema"] == [
        {"AttributeName": "open_shard", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    statements = [
        s
        for policy in props(cfn, "FailOverdueJobsFunctionRole")["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    queries = [s for s in statements if "dynamodb:Query" in _actions(s)]
    resources = [r for q in queries for r in (q["Resource"] if isinstance(q["Resource"], list) else [q["Resource"]])]
    # The jobs table only through its sparse indexes: the open jobs, and (issue 34: the pending counters' heal) each
    # caller's open counted jobs; the usage table only through its index of callers with a counter.
    assert sorted(str(r) for r in resources) == sorted(
        str({"Fn::Sub": f"${{{table}.Arn}}/index/{index}"})
        for table, index in (("JobsTable", "open-jobs"), ("JobsTable", "caller-open-jobs"),
                             ("UsageTable", "pending-counters"))
    )  # fmt: skip
    assert not any("dynamodb:Scan" in _actions(s) for s in statements)
    env = props(cfn, "FailOverdueJobsFunction")["Environment"]["Variables"]
    assert env["JOB_DEADLINE_SECONDS"] == {"Ref": "JobDeadlineSeconds"}
    (rule,) = [
        r
        for r in of_type(cfn, "AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"]
        and r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["FailOverdueJobsFunction", "Arn"]}
    ]
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"


def test_listing_reads_only_the_owner_index_and_never_scans(cfn: dict[str, Any]) -> None:
    from omnireel.aws.job_store import OWNER_JOBS_INDEX

    (index,) = [i for i in props(cfn, "JobsTable")["GlobalSecondaryIndexes"] if i["IndexName"] == OWNER_JOBS_INDEX]
    assert index["KeySchema"] == [
        {"AttributeName": "owner", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    statements = [
        s for policy in props(cfn, "ApiFunctionRole")["Policies"] for s in policy["PolicyDocument"]["Statement"]
    ]
    queries = [s for s in statements if "dynamodb:Query" in _actions(s)]
    on_jobs = [q["Resource"] for q in queries if "JobsTable" in str(q["Resource"])]
    assert on_jobs == [{"Fn::Sub": "${JobsTable.Arn}/index/owner-jobs"}]  # other tables: their own tests
    assert not any("dynamodb:Scan" in _actions(s) for s in statements)
    (stop,) = [s for s in statements if "states:StopExecution" in _actions(s)]
    assert ":execution:${PipelineStateMachine.Name}:*" in stop["Resource"]["Fn::Sub"]


def test_generate_image_may_publish_job_image_ready_to_the_job_events_topic_only(cfn: dict[str, Any]) -> None:
    statements = [
        s
        for policy in props(cfn, "GenerateImageFunctionRole")["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    (publish,) = [s for s in statements if "sns:Publish" in _actions(s)]
    assert publish["Resource"] == {"Ref": "JobEventsTopic"}
    env = props(cfn, "GenerateImageFunction")["Environment"]["Variables"]
    assert env["JOB_EVENTS_TOPIC_ARN"] == {"Ref": "JobEventsTopic"}


def test_only_events_with_a_webhook_reach_the_webhook_queue(cfn: dict[str, Any]) -> None:
    subscription = props(cfn, "WebhookSubscription")
    assert subscription["TopicArn"] == {"Ref": "JobEventsTopic"} and subscription["Protocol"] == "sqs"
    assert subscription["FilterPolicyScope"] == "MessageAttributes"
    assert subscription["FilterPolicy"] == {"webhook": [{"exists": True}]}
    # the Allow of the topic; the Deny of everyone else is issue 33's rule (test_send_policies.py)
    statements = props(cfn, "WebhookQueuePolicy")["PolicyDocument"]["Statement"]
    (statement,) = [s for s in statements if s["Effect"] == "Allow"]
    assert statement["Principal"] == {"Service": "sns.amazonaws.com"}
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": "JobEventsTopic"}}}


def test_the_webhook_delivery_role_is_least_privilege(cfn: dict[str, Any]) -> None:
    statements = [
        s
        for policy in props(cfn, "WebhookDeliveryFunctionRole")["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    actions = sorted(a for s in statements for a in _actions(s))
    assert not [a for a in actions if a.endswith("*")]
    assert "sqs:SendMessage" not in actions and "dynamodb:PutItem" not in actions
    secret = [s for s in statements if "secretsmanager:GetSecretValue" in _actions(s)]
    assert [s["Resource"] for s in secret] == [{"Ref": "WebhookSigningSecret"}]


@pytest.mark.parametrize("function", ["ApiFunction", "InboxFunction", "FailOverdueJobsFunction"])
def test_starting_functions_may_describe_only_their_executions(cfn: dict[str, Any], function: str) -> None:
    statements = [
        s for policy in props(cfn, f"{function}Role")["Policies"] for s in policy["PolicyDocument"]["Statement"]
    ]
    (describe,) = [s for s in statements if "states:DescribeExecution" in _actions(s)]
    execution = "execution:${PipelineStateMachine.Name}:*"
    assert describe["Resource"] == {
        "Fn::Sub": f"arn:${{AWS::Partition}}:states:${{AWS::Region}}:${{AWS::AccountId}}:{execution}"
    }


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _role_statements(cfn: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [s for policy in props(cfn, role).get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize(
    ("role", "prefixes"),
    [
        ("ReconcileVideoFunctionRole", ["async/*", "jobs/*"]),
        ("AsyncResultFunctionRole", ["async/*", "jobs/*"]),
        ("GenerateImageFunctionRole", ["jobs/*"]),
    ],
)
def test_functions_that_head_artifacts_may_list_exactly_those_prefixes(
    cfn: dict[str, Any], role: str, prefixes: list[str]
) -> None:
    """Defect 3: without s3:ListBucket S3 answers HeadObject of a missing key with 403, not 404."""
    listing = [s for s in _role_statements(cfn, role) if s["Action"] == "s3:ListBucket"]
    assert len(listing) == 1, role
    assert listing[0]["Resource"] == {"Fn::GetAtt": ["ArtifactsBucket", "Arn"]}
    granted = listing[0]["Condition"]["StringLike"]["s3:prefix"]
    assert sorted(granted if isinstance(granted, list) else [granted]) == prefixes


def test_relay_may_invoke_only_the_tts_endpoint(cfn: dict[str, Any]) -> None:
    """Defect 6: the bidirectional-stream action is not in the IAM catalogue; InvokeEndpoint is granted as well."""
    statements = [s for s in _role_statements(cfn, "RelayTaskRole") if "sagemaker" in str(s["Action"])]
    assert len(statements) == 1
    assert sorted(statements[0]["Action"]) == [
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    ]
    assert statements[0]["Resource"] == {"Ref": "TtsEndpoint"}


def test_the_inbox_function_may_list_its_prompts_so_a_vanished_version_is_a_404(cfn: dict[str, Any]) -> None:
    """Without s3:ListBucket a read of a deleted version answers 403: the job would never get its job.failed."""
    listing = [s for s in _role_statements(cfn, "InboxFunctionRole") if s["Action"] == "s3:ListBucket"]
    assert len(listing) == 1
    assert listing[0]["Condition"] == {"StringLike": {"s3:prefix": "prompts/*"}}
    assert listing[0]["Resource"]["Fn::Sub"].endswith("-inbox-${AWS::AccountId}-${AWS::Region}")
