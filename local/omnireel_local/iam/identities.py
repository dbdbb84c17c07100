"""Who calls the local AWS once IAM is enforced: the stack's own identities and the service-role credentials.

After provisioning, the local AWS authenticates every request (SigV4 with a key it knows) and evaluates the caller's
policies (``patches.iam_auth`` / ``policy``). The callers are:

- ``omnireel-local-admin`` (IAM user, ``*`` on ``*``): the stack process itself acting as CloudFormation and as the
  AWS control plane -- the provisioner, the on-failure destination sender, the CLI events-queue subscription, the relay
  token, the SageMaker shim's reads of endpoint configurations. Admin because on AWS these are the service itself, not
  a principal of the account. Created before enforcement starts; its key never leaves the stack process.
- ``omnireel-local-apigateway`` (IAM user): the front door invoking Lambda as API Gateway does. Its only policy is
  ``lambda:InvokeFunction`` on the functions the template's ``AWS::Lambda::Permission`` resources grant to
  ``apigateway.amazonaws.com``.
- ``omnireel-local`` (IAM user with an access key): the developer at the keyboard -- the CLI and
  ``eval "$(omnireel local env)"``. Its policy (``developer_policy``) is what a developer of this app needs: drop
  prompts, read job outputs, consume job events, inspect the stack, tune functions, edit the stack's role policies
  and, as the stack's operator, read and rotate the webhook master key (``omnireel webhooks rotate``).
  Not admin: no users, keys or other IAM principals.
- Service-role sessions (``ServiceCredentials``): each Lambda function runs as its template role, the state machine
  calls Lambda as its role, the SageMaker shim acts as the model's ExecutionRoleArn. Assumed in-process from moto's
  STS backend -- as the AWS service does, without a caller's key -- after checking that the role's trust policy
  trusts the service principal.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .policy import ALLOW, Principal, document, evaluate

ADMIN_USER = "omnireel-local-admin"
APIGATEWAY_USER = "omnireel-local-apigateway"
# The name the front door reported for every caller before IAM was enforced. API job ids derive from the caller's
# unique id, which ``unique_id`` derives from this name: seeded runs (tests/reliability, whose fault decisions hash the
# job id) get the same ids at every start.
DEVELOPER_USER = "omnireel-local"
# Role sessions last an hour (the default MaxSessionDuration); they are re-assumed this long before they expire.
SESSION_SECONDS = 3600
REFRESH_MARGIN_S = 300


# IAM unique ids (patches.iam_ids): a prefix by kind and 17 characters of this alphabet, 21 in all, as AWS issues them.
UNIQUE_ID_PREFIXES = {"user": "AIDA", "role": "AROA"}
_UNIQUE_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_incarnations: dict[tuple[str, str, str], int] = {}
_incarnations_lock = threading.Lock()


def unique_id(account_id: str, kind: str, name: str) -> str:
    """A new IAM unique id for the ``kind`` ("user") named ``name``, as IAM gives one at each creation: a user
    deleted and re-created with the same name gets another id (AWS: "IAM identifiers", unique IDs). Derived from the
    account, the name and how many times this process has created that name, not drawn at random, so a stack started
    afresh gives its identities the same ids as the last start did: API job ids derive from the caller's id
    (Idempotency-Key + scope), and seeded runs (tests/reliability) keep the ids they were tuned with."""
    with _incarnations_lock:
        n = _incarnations.get((account_id, kind, name), 0) + 1
        _incarnations[(account_id, kind, name)] = n
    digest = hashlib.sha256(f"{account_id}|{kind}|{name}|{n}".encode()).digest()
    return UNIQUE_ID_PREFIXES[kind] + "".join(_UNIQUE_ID_ALPHABET[b % 32] for b in digest[:17])


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None
    expires_at: float | None = None  # epoch seconds; None for an IAM user's access key

    def boto(self) -> dict[str, str]:
        """Keyword arguments for boto3.client / boto3.Session."""
        out = {"aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key}
        if self.session_token:
            out["aws_session_token"] = self.session_token
        return out

    def environment(self) -> dict[str, str]:
        out = {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if self.session_token:
            out["AWS_SESSION_TOKEN"] = self.session_token
        return out

    def valid_for(self, seconds: float) -> bool:
        return self.expires_at is None or self.expires_at - time.time() > seconds


def create_user(iam: Any, name: str, policy: dict[str, Any]) -> Credentials:
    """An IAM user with one inline policy and an access key (through the IAM API of the local AWS)."""
    iam.create_user(UserName=name, Tags=[{"Key": "omnireel:local", "Value": "stack identity"}])
    iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return Credentials(key["AccessKeyId"], key["SecretAccessKey"])


ADMIN_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def apigateway_policy(function_arns: list[str]) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": function_arns}
    if not function_arns:  # no route functions: a policy that allows nothing
        statement = {"Effect": "Deny", "Action": "*", "Resource": "*"}
    return {"Version": "2012-10-17", "Statement": [statement]}


def developer_policy(stack: str, region: str, account: str) -> dict[str, Any]:
    """What a developer of the app may do on their stack (the resources named ``<stack>-*``)."""
    scoped = f"{stack}-*"
    arn = f"arn:aws:{{}}:{region}:{account}:{{}}"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DropPromptsAndReadOutputs",
                "Effect": "Allow",
                "Action": [
                    "s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion",
                    "s3:GetObjectTagging", "s3:GetObjectVersionTagging",
                ],
                "Resource": f"arn:aws:s3:::{scoped}/*",
            },
            {
                "Sid": "ListTheStackBuckets",
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation", "s3:GetBucket*"],
                "Resource": f"arn:aws:s3:::{scoped}",
            },
            {"Sid": "ListBuckets", "Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"},
            {
                "Sid": "ScratchPrincipals",
                "Effect": "Allow",
                # Other callers for multi-caller experiments (two keys, two sessions of one role). A scratch principal
                # may be given any policy: the local stack is a test harness, not a security boundary.
                "Action": [
                    "iam:CreateUser", "iam:DeleteUser", "iam:CreateAccessKey", "iam:DeleteAccessKey",
                    "iam:PutUserPolicy", "iam:DeleteUserPolicy", "iam:CreateRole", "iam:DeleteRole",
                    "iam:PutRolePolicy", "iam:DeleteRolePolicy", "sts:AssumeRole",
                ],
                "Resource": [
                    f"arn:aws:iam::{account}:user/{stack}-scratch-*",
                    f"arn:aws:iam::{account}:role/*{stack}-scratch-*",
                ],
            },
            {
                "Sid": "ScratchStateMachines",
                "Effect": "Allow",
                "Action": [
                    "states:CreateStateMachine", "states:DeleteStateMachine", "states:StartExecution",
                    "states:StopExecution", "states:Describe*", "states:List*",
                ],
                "Resource": [
                    arn.format("states", f"stateMachine:{stack}-scratch-*"),
                    arn.format("states", f"execution:{stack}-scratch-*"),
                ],
            },
            {
                "Sid": "ScratchBuckets",
                "Effect": "Allow",
                "Action": "s3:*",
                # Buckets a developer creates for experiments next to the stack (``<stack>-scratch-*``).
                "Resource": [f"arn:aws:s3:::{stack}-scratch-*", f"arn:aws:s3:::{stack}-scratch-*/*"],
            },
            {
                "Sid": "CallTheHttpApi",
                "Effect": "Allow",
                "Action": "execute-api:Invoke",
                # The front door's API (id "local", stage $default): every method and route.
                "Resource": f"arn:aws:execute-api:{region}:{account}:local/$default/*/*",
            },
            {
                "Sid": "ConsumeJobEvents",
                "Effect": "Allow",
                "Action": "sqs:*",
                # The stack's queues, and consumer queues the developer's tools create (omnireel-cli-tap-*, ...).
                "Resource": [arn.format("sqs", scoped), arn.format("sqs", "omnireel-*")],
            },
            {
                "Sid": "SubscribeToJobEvents",
                "Effect": "Allow",
                "Action": [
                    "sns:Subscribe", "sns:Unsubscribe", "sns:GetTopicAttributes", "sns:ListSubscriptionsByTopic",
                ],
                "Resource": arn.format("sns", scoped),
            },
            {
                "Sid": "InspectTheStack",
                "Effect": "Allow",
                "Action": [
                    # DeleteItem: a developer may remove a job record as DynamoDB TTL would (to replay an expired key)
                    "dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:DescribeTable",
                    "dynamodb:DeleteItem",
                    "states:Describe*", "states:List*", "states:GetExecutionHistory",
                    "lambda:GetFunction", "lambda:GetFunctionConfiguration", "lambda:UpdateFunctionConfiguration",
                    "lambda:InvokeFunction",  # `omnireel invoke` (sam remote invoke needs it on AWS too)
                    # pause and resume a queue's consumer (UpdateEventSourceMapping Enabled=false/true), read its State
                    "lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping",
                    "sagemaker:Describe*", "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointAsync",
                    # scale an endpoint by hand, as Application Auto Scaling does (the local stack has none)
                    "sagemaker:UpdateEndpointWeightsAndCapacities",
                    "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue",
                ],
                "Resource": [
                    arn.format("dynamodb", f"table/{scoped}"),
                    arn.format("states", f"stateMachine:{scoped}"),
                    arn.format("states", f"execution:{scoped}"),
                    arn.format("lambda", f"function:{scoped}"),
                    # an event source mapping's ARN names only its UUID; the local account holds this stack's alone
                    arn.format("lambda", "event-source-mapping:*"),
                    arn.format("sagemaker", f"endpoint/{scoped.lower()}"),
                    arn.format("sagemaker", f"endpoint-config/{scoped.lower()}"),
                    # which model and image an endpoint serves (issue 27 item 9): DescribeModel on the stack's own
                    arn.format("sagemaker", f"model/{scoped.lower()}"),
                    arn.format("secretsmanager", f"secret:{scoped}"),
                ],
            },
            {
                "Sid": "RotateTheWebhookSigningKey",
                "Effect": "Allow",
                # `omnireel webhooks rotate`: the operator writes the webhook master key (no function role may).
                "Action": "secretsmanager:PutSecretValue",
                "Resource": arn.format("secretsmanager", f"secret:{stack}-WebhookSigningSecret-*"),
            },
            {
                "Sid": "ListAndRead",
                "Effect": "Allow",
                "Action": [
                    "sqs:ListQueues", "sns:ListTopics", "dynamodb:ListTables", "lambda:ListFunctions",
                    "lambda:ListEventSourceMappings",
                    "states:ListStateMachines", "sagemaker:List*",
                    "logs:Describe*", "logs:Get*", "logs:FilterLogEvents",
                    "iam:Get*", "iam:List*", "sts:GetCallerIdentity",
                ],
                "Resource": "*",
            },
            {
                "Sid": "EditTheStackRolePolicies",
                "Effect": "Allow",
                "Action": ["iam:PutRolePolicy", "iam:DeleteRolePolicy", "iam:AttachRolePolicy", "iam:DetachRolePolicy"],
                "Resource": f"arn:aws:iam::{account}:role/{scoped}",
            },
        ],
    }  # fmt: skip


class TrustError(PermissionError):
    pass


class ServiceCredentials:
    """Role sessions for AWS services (Lambda, Step Functions, SageMaker), cached until shortly before they expire."""

    def __init__(self, account_id: str, region: str, session_seconds: int = SESSION_SECONDS):
        self.account_id = account_id
        self.region = region
        self.session_seconds = session_seconds
        self._cache: dict[tuple[str, str, str], Credentials] = {}
        self._lock = threading.Lock()

    def get(
        self, role_arn: str, service: str, session_name: str, *, valid_for: float = REFRESH_MARGIN_S
    ) -> Credentials:
        """Credentials of ``role_arn`` for ``service`` (e.g. ``lambda.amazonaws.com``), valid ``valid_for`` s more."""
        key = (role_arn, service, session_name)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached.valid_for(valid_for):
                return cached
            fresh = self._assume(role_arn, service, session_name)
            self._cache[key] = fresh
            return fresh

    def _assume(self, role_arn: str, service: str, session_name: str) -> Credentials:
        from moto.iam.models import iam_backends
        from moto.sts.models import sts_backends

        role = iam_backends[self.account_id]["aws"].get_role_by_arn(role_arn)
        trust = document(role.assume_role_policy_document)
        caller = Principal(f"service:{service}", self.account_id, service=service)
        decision = evaluate([trust], "sts:AssumeRole", role_arn, {}, caller, resource_policy=True)
        if decision != ALLOW:
            raise TrustError(f"the trust policy of {role_arn} does not let {service} assume it")
        duration = min(self.session_seconds, int(getattr(role, "max_session_duration", 3600) or 3600))
        session = sts_backends[self.account_id]["aws"].assume_role(
            region_name=self.region,
            role_session_name=session_name[:64],
            role_arn=role_arn,
            policy=None,
            duration=duration,
            external_id=None,
        )
        expiration = session.expiration
        if expiration.tzinfo is None:
            expiration = expiration.replace(tzinfo=UTC)
        return Credentials(
            session.access_key_id, session.secret_access_key, session.session_token, expiration.timestamp()
        )


def session_expired(access_key_id: str, account_id: str) -> bool | None:
    """True/False for a role session's key known to moto's STS; None for any other key."""
    from moto.sts.models import sts_backends

    for session in sts_backends[account_id]["aws"].assumed_roles:
        if session.access_key_id == access_key_id:
            expiration = session.expiration
            if expiration.tzinfo is None:
                expiration = expiration.replace(tzinfo=UTC)
            return expiration <= datetime.now(UTC)
    return None
