"""The local AWS's policy evaluator (omnireel_local/iam/policy.py): the parts of AWS's evaluation the stack uses."""

from __future__ import annotations

import pytest

from omnireel_local.iam.policy import ALLOW, DENY, NEUTRAL, Principal, _wildcard_regex, evaluate, resource_arn, wildcard

ROLE = Principal("arn:aws:sts::123456789012:assumed-role/fn-role/fn", "123456789012")
BUCKET = "arn:aws:s3:::artifacts"


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


LIST_ASYNC = policy(
    {
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": BUCKET,
        "Condition": {"StringLike": {"s3:prefix": ["async/*", "jobs/*"]}},
    }
)


@pytest.mark.parametrize(("prefix", "expected"), [("async/x.out", ALLOW), ("jobs/1/video.mp4", ALLOW), ("", NEUTRAL)])
def test_a_prefix_condition_scopes_list_bucket(prefix: str, expected: str) -> None:
    assert evaluate([LIST_ASYNC], "s3:ListBucket", BUCKET, {"s3:prefix": prefix}, ROLE) == expected


def test_an_allow_whose_condition_fails_is_not_a_deny() -> None:
    # moto's evaluator turned a failed Condition into an explicit Deny that overrode every other Allow.
    other = policy({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET})
    assert evaluate([LIST_ASYNC, other], "s3:ListBucket", BUCKET, {"s3:prefix": "secret/"}, ROLE) == ALLOW


def test_actions_match_case_insensitively_with_wildcards_and_resources_exactly() -> None:
    doc = policy({"Effect": "Allow", "Action": "S3:Get*", "Resource": f"{BUCKET}/jobs/*"})
    assert evaluate([doc], "s3:GetObject", f"{BUCKET}/jobs/1/image.png", {}, ROLE) == ALLOW
    assert evaluate([doc], "s3:GetObject", f"{BUCKET}/async/1.out", {}, ROLE) == NEUTRAL
    assert evaluate([doc], "s3:PutObject", f"{BUCKET}/jobs/1/image.png", {}, ROLE) == NEUTRAL


def test_wildcard_patterns_are_built_once_and_mean_the_same_every_time() -> None:
    """Speed only: one compiled expression per (pattern, case rule); the match is IAM's on every call, cached or not."""
    _wildcard_regex.cache_clear()
    for _ in range(3):
        assert wildcard("S3:Get*", "s3:GetObject", ignore_case=True)
        assert not wildcard("S3:Get*", "s3:GetObject")  # the same pattern, case-sensitive: its own expression
        assert wildcard("arn:aws:s3:::b/jobs/?/x.png", "arn:aws:s3:::b/jobs/1/x.png")
        assert not wildcard("arn:aws:s3:::b/jobs/?/x.png", "arn:aws:s3:::b/jobs/12/x.png")
        assert not wildcard("arn:aws:s3:::b/a.b+(c)", "arn:aws:s3:::b/aXb+(c)")  # regex characters are literal
        assert wildcard("arn:aws:s3:::b/*", "arn:aws:s3:::b/line1\nline2")
    info = _wildcard_regex.cache_info()
    assert (info.misses, info.hits) == (5, 13)


def test_an_explicit_deny_wins_and_negated_operators_hold_for_a_missing_key() -> None:
    allow = policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"})
    deny_insecure = policy(
        {
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": f"{BUCKET}/*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    )
    assert evaluate([deny_insecure], "s3:GetObject", f"{BUCKET}/k", {"aws:SecureTransport": "false"}, ROLE,
                    resource_policy=True) == DENY  # fmt: skip
    assert evaluate([deny_insecure], "s3:GetObject", f"{BUCKET}/k", {"aws:SecureTransport": "true"}, ROLE,
                    resource_policy=True) == NEUTRAL  # fmt: skip
    assert evaluate([allow], "s3:GetObject", f"{BUCKET}/k", {}, ROLE) == ALLOW
    guard = policy(
        {
            "Effect": "Deny",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringNotEquals": {"aws:PrincipalOrgID": "o-1"}},
        }
    )
    assert evaluate([allow, guard], "s3:GetObject", f"{BUCKET}/k", {}, ROLE) == DENY


def test_an_unknown_condition_operator_fails_closed() -> None:
    odd = {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}
    allow = policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": odd})
    deny = policy({"Effect": "Deny", "Action": "s3:GetObject", "Resource": "*", "Condition": odd})
    assert evaluate([allow], "s3:GetObject", f"{BUCKET}/k", {}, ROLE) == NEUTRAL
    assert evaluate([deny], "s3:GetObject", f"{BUCKET}/k", {}, ROLE) == DENY


def test_trust_policies_match_the_service_principal_only() -> None:
    trust = policy({"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"})
    lambda_service = Principal("service:lambda.amazonaws.com", "123456789012", service="lambda.amazonaws.com")
    user = Principal("arn:aws:iam::123456789012:user/dev", "123456789012")
    role = "arn:aws:iam::123456789012:role/fn-role"
    assert evaluate([trust], "sts:AssumeRole", role, {}, lambda_service, resource_policy=True) == ALLOW
    assert evaluate([trust], "sts:AssumeRole", role, {}, user, resource_policy=True) == NEUTRAL


@pytest.mark.parametrize(
    ("service", "action", "path", "data", "body", "expected"),
    [
        ("dynamodb", "dynamodb:GetItem", "/", {}, b'{"TableName": "jobs"}',
         "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"),
        ("lambda", "lambda:InvokeFunction", "/2015-03-31/functions/fn/invocations", {}, b"{}",
         "arn:aws:lambda:us-east-1:123456789012:function:fn"),
        ("sagemaker", "sagemaker:InvokeEndpoint", "/endpoints/My-Endpoint/invocations", {}, b"",
         "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-endpoint"),
        ("sns", "sns:Publish", "/", {"TopicArn": ["arn:aws:sns:us-east-1:123456789012:t"]}, b"",
         "arn:aws:sns:us-east-1:123456789012:t"),
        ("states", "states:StartExecution", "/", {}, b'{"stateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:p"}'
         , "arn:aws:states:us-east-1:1:stateMachine:p"),
        ("sqs", "sqs:CreateQueue", "/", {}, b'{"QueueName": "omnireel-cli-tap-1"}',
         "arn:aws:sqs:us-east-1:123456789012:omnireel-cli-tap-1"),
        ("sqs", "sqs:ReceiveMessage", "/", {}, b'{"QueueUrl": "http://127.0.0.1:5/123456789012/q"}',
         "arn:aws:sqs:us-east-1:123456789012:q"),
        ("events", "events:PutEvents", "/", {}, b'{"Entries": [{"Source": "x"}]}',
         "arn:aws:events:us-east-1:123456789012:event-bus/default"),
        ("cloudwatch", "cloudwatch:PutMetricData", "/", {}, b"", "*"),
    ],
)  # fmt: skip
def test_the_resource_of_the_calls_the_pipeline_makes(service, action, path, data, body, expected) -> None:
    assert resource_arn(service, action, path, data, body, "us-east-1", "123456789012") == expected
