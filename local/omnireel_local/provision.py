"""Provision the local AWS from template.yaml (the single source of truth), through the AWS APIs.

1. Load template.yaml, point every local ``CodeUri`` / ``ContentUri`` / ``DefinitionUri`` at a placeholder S3
   location (remembering the folder, as ``sam build`` would), and run the SAM transform (aws-sam-translator) - the
   same expansion CloudFormation performs: functions, roles, permissions, SNS subscriptions, bucket notifications,
   event-invoke configs, the HTTP API's OpenAPI body, the state machine with its substitutions.
2. Resolve intrinsics (Ref, GetAtt, Sub, If, Equals, FindInMap, Select, Join, Split, conditions) against parameter
   values (template defaults + local overrides) and the physical ids of already-created resources.
3. Create each resource through boto3 against the local endpoint, in dependency order (a resource waits until
   everything it references exists). Types without a local meaning are recorded as skipped, with the reason.

The state machine is created with the StepFunctions API (moto's CloudFormation would put it into the non-executing
backend) from the ASL file with its DefinitionSubstitutions resolved. Parameter values are passed to API calls in
the types botocore's service model expects (CloudFormation passes strings; APIs want numbers and booleans).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from omnireel_template import (
    ROOT,
    load_template,
    parameter_defaults,
    placeholder_code,
    render_definition,
    sam_transform,
)

from . import cfn_rules

log = logging.getLogger("omnireel_local.provision")

CODE_BUCKET = "omnireel-local-code"
TRANSFORM_CACHE = ROOT / ".aws-sam" / "local-transform"  # cached_sam_transform's results (git-ignored, make clean)
NO_VALUE = object()

# Local parameter values: short retry intervals and callback timeouts so that failure paths end in seconds, not hours.
# They stay parameters (the template is unchanged); `omnireel local up --parameter Name=Value` overrides them.
LOCAL_PARAMETERS = {
    "RetryIntervalSeconds": "1",
    "ImageMaxAttempts": "2",
    "VideoInvocationTimeoutSeconds": "120",
    "VideoRequestTtlSeconds": "60",
    "VideoHeartbeatSeconds": "200",
    "VideoCallbackTimeoutSeconds": "240",
    # Longer than any local execution can run with the values above (tests/unit/template checks the bound). A test
    # that wants the safety net sooner starts its own stack with `--parameter JobDeadlineSeconds=N`.
    "JobDeadlineSeconds": "7800",
    # Webhooks: http:// to 127.0.0.1 for local receivers (`omnireel webhooks listen`), and the retry clock compressed
    # like the schedules' (first retry after 1 s instead of 30 s, then doubling).
    "WebhookAllowLoopbackHttp": "true",
    "WebhookRetryBaseSeconds": "1",
    # The batch reconciler's grace on the compressed clock (15 min -> 30 s): a lost terminal event is made good within
    # about half a minute. Tests that want it sooner pass `--parameter BatchReconcileGraceSeconds=N`.
    "BatchReconcileGraceSeconds": "30",
    # The admission healer's grace (60 s -> 10 s): a grant whose answer was lost is answered again about 10 s later,
    # not a minute (the healer itself runs every local "minute", 2 s). Not shorter: a step can take seconds to start
    # on a loaded laptop, and the grace is what leaves it alone.
    "AdmissionHealGraceSeconds": "10",
    # The voice network parameters feed only resources with no local meaning (ECS, load balancer, security groups:
    # SKIPPED below), but the template's Rules require them with EnableVoice=true - as CloudFormation would.
    "RelayImageUri": "000000000000.dkr.ecr.us-east-1.amazonaws.com/omnireel-relay:local",
    "RelayCertificateArn": "arn:aws:acm:us-east-1:000000000000:certificate/00000000-0000-0000-0000-000000000000",
    "VpcId": "vpc-00000000",
    "PublicSubnetIds": "subnet-0000000a,subnet-0000000b",
    "RelaySubnetIds": "subnet-0000000c",
}

# Resource types with no local behaviour to provision. Roles are created with their inline and managed policies, and
# the local AWS enforces them (patches.iam_auth / iam.policy); bucket, topic and queue policies are provisioned and
# evaluated for signed calls too.
SKIPPED = {
    "AWS::ApiGatewayV2::Stage": "the local front door serves the $default stage",
    "AWS::EC2::SecurityGroup": "no VPC networking locally",
    "AWS::ECS::Cluster": "containers run as local processes (the relay: started by `omnireel local up`)",
    "AWS::ECS::TaskDefinition": "containers run as local processes (the relay: started by `omnireel local up`)",
    "AWS::ECS::Service": "containers run as local processes (the relay: started by `omnireel local up`)",
    "AWS::ElasticLoadBalancingV2::LoadBalancer": "the relay listens directly on 127.0.0.1",
    "AWS::ElasticLoadBalancingV2::Listener": "the relay listens directly on 127.0.0.1",
    "AWS::ElasticLoadBalancingV2::TargetGroup": "the relay listens directly on 127.0.0.1",
    "AWS::CloudWatch::Alarm": "no alarms locally",
    "AWS::CloudWatch::Dashboard": "no dashboards locally",
    "AWS::ApplicationAutoScaling::ScalableTarget": "endpoints do not scale locally",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "endpoints do not scale locally",
}
# (AWS::Events::Rule: schedule rules are provisioned and run by schedules.py; pattern rules are skipped with a reason.)


class TemplateRulesFailed(RuntimeError):
    """A parameter constraint or a Rules assertion fails: CloudFormation refuses the stack before creating anything."""


class NotReady(Exception):
    """A referenced resource does not exist yet (provision it later)."""


@dataclass
class Route:
    method: str
    path: str
    function_name: str
    payload_format: str = "2.0"
    authorization: str = "NONE"

    def as_dict(self) -> dict[str, str]:
        return self.__dict__.copy()


@dataclass
class Provisioned:
    stack_name: str
    region: str
    account_id: str
    parameters: dict[str, Any]
    physical: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    functions: dict[str, dict[str, Any]] = field(default_factory=dict)  # function name -> {code_dir, layer_dirs}
    models: dict[str, dict[str, str]] = field(default_factory=dict)  # SageMaker model name -> container env
    routes: list[Route] = field(default_factory=list)
    schedules: list[dict[str, Any]] = field(default_factory=list)  # {rule_arn, expression, targets} (schedules.py)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    # AWS::Lambda::Permission: service principal -> function ARNs it may invoke (the front door honours apigateway's)
    invoke_permissions: dict[str, list[str]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "stack_name": self.stack_name,
            "resources": {
                k: {"type": v["Type"], "id": v["Ref"]} for k, v in self.physical.items() if v["Ref"] is not NO_VALUE
            },
            "outputs": self.outputs,
            "functions": self.functions,
            "models": self.models,
            "routes": [r.as_dict() for r in self.routes],
            "schedules": self.schedules,
            "skipped": [{"logical_id": a, "type": b, "reason": c} for a, b, c in self.skipped],
            "invoke_permissions": self.invoke_permissions,
        }


def transform(stack_name: str, region: str, template: dict[str, Any] | None = None) -> tuple[dict, dict, dict]:
    """(SAM template, transformed CloudFormation template, local folders by placeholder S3 key)."""
    sam, folders = placeholder_code(template or load_template(), CODE_BUCKET)
    return sam, cached_sam_transform(sam, stack_name, region), folders


def cached_sam_transform(sam: dict[str, Any], stack_name: str, region: str, cache: Path = TRANSFORM_CACHE) -> dict:
    """``sam_transform``, its result kept in ``cache`` under a digest of everything it depends on: the SAM template
    (code locations included), the stack name, the region and the translator's version. The transform is a pure
    function of those, so a kept result is the one it would compute: every stack start of a test run (a dozen) and
    every `omnireel local up` after the first skip importing aws-sam-translator and translating (~0.5 CPU-s). A cache
    that cannot be read or written (a read-only checkout) is skipped."""
    from importlib.metadata import version

    key = json.dumps([sam, stack_name, region, version("aws-sam-translator")], sort_keys=True, default=str)
    path = cache / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    cfn = sam_transform(sam, stack_name, region)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(cfn), encoding="utf-8")
        partial.replace(path)  # atomic: parallel stack starts (test workers) never read half a file
    except OSError as exc:
        log.debug("SAM transform not cached (%s)", exc)
    return cfn


def _zip_dir(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(folder))
    return buffer.getvalue()


def _lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation LifecycleConfiguration rule in the S3 API's shape."""
    out: dict[str, Any] = {"ID": rule.get("Id", "rule"), "Status": rule.get("Status", "Enabled")}
    out["Filter"] = {"Prefix": rule["Prefix"]} if "Prefix" in rule else {"Prefix": ""}
    if "ExpirationInDays" in rule:
        out["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "ExpiredObjectDeleteMarker" in rule:
        out["Expiration"] = {"ExpiredObjectDeleteMarker": bool(rule["ExpiredObjectDeleteMarker"])}
    if "NoncurrentVersionExpirationInDays" in rule:
        out["NoncurrentVersionExpiration"] = {"NoncurrentDays": int(rule["NoncurrentVersionExpirationInDays"])}
    if "NoncurrentVersionExpiration" in rule:
        out["NoncurrentVersionExpiration"] = rule["NoncurrentVersionExpiration"]
    if "AbortIncompleteMultipartUpload" in rule:
        out["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
    return out


def _sagemaker_arn(arn: str) -> str:
    """SageMaker ARNs carry the resource name in lower case on AWS (moto keeps the case): policies match on it."""
    prefix, _, name = arn.rpartition("/")
    return f"{prefix}/{name.lower()}"


def coerce(value: Any, shape: Any) -> Any:
    """Convert CloudFormation's string scalars to what the API's botocore shape expects."""
    if shape is None or value is None:
        return value
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        return {k: coerce(v, shape.members.get(k)) for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [coerce(v, shape.member) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: coerce(v, shape.value) for k, v in value.items()}
    if kind in ("integer", "long") and isinstance(value, str):
        return int(value)
    if kind in ("float", "double") and isinstance(value, str):
        return float(value)
    if kind == "boolean" and isinstance(value, str):
        return value.lower() == "true"
    if kind == "string" and isinstance(value, (bool, int, float)) and not isinstance(value, str):
        return str(value).lower() if isinstance(value, bool) else str(value)
    return value


class Provisioner:
    def __init__(
        self,
        endpoint_url: str,
        *,
        stack_name: str = "omnireel-local",
        region: str = "us-east-1",
        account_id: str = "123456789012",
        parameter_overrides: dict[str, str] | None = None,
        credentials: dict[str, str] | None = None,
    ):
        """``credentials``: boto3 keyword arguments of the identity that provisions (the stack's admin)."""
        self.stack_name = stack_name
        self.region = region
        self.account_id = account_id
        self.session = boto3.Session(
            **(credentials or {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}),
            region_name=region,
        )
        self.endpoint_url = endpoint_url
        self._clients: dict[str, Any] = {}
        self.overrides = {**LOCAL_PARAMETERS, **(parameter_overrides or {})}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(
                service, endpoint_url=self.endpoint_url, config=Config(retries={"max_attempts": 2})
            )
        return self._clients[service]

    def call(self, service: str, operation: str, **params: Any) -> Any:
        """An API call with parameters coerced to the operation's input shape."""
        client = self.client(service)
        model = client.meta.service_model.operation_model(client.meta.method_to_api_mapping.get(operation, operation))
        return getattr(client, operation)(**coerce(params, model.input_shape))

    def optional(self, what: str, action: Callable[[], Any]) -> None:
        """A setting that changes nothing the local pipeline depends on: warn instead of failing startup."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001
            log.warning("could not apply %s locally: %s", what, exc)

    # ---------------------------------------------------------------- entry point
    def run(self, template: dict[str, Any] | None = None) -> Provisioned:
        sam, cfn, folders = transform(self.stack_name, self.region, template)
        # CloudFormation checks parameter constraints and the Rules section before it creates anything.
        # Then what Rules cannot compare, which AWS refuses later (CreateStateMachine): here, before anything too.
        unknown = cfn_rules.unknown_parameters(sam, self.overrides)
        if unknown:  # CloudFormation's first check: nothing else is looked at
            raise TemplateRulesFailed(unknown[0] + " (nothing was created)")
        refused = (
            cfn_rules.constraint_violations(sam, self.overrides)
            + cfn_rules.failed_assertions(
                sam, self.overrides, stack_name=self.stack_name, region=self.region, account_id=self.account_id
            )
            + cfn_rules.comparison_violations(sam, self.overrides)
        )
        if refused:
            raise TemplateRulesFailed(
                "the template refuses these parameters (nothing was created): " + "; ".join(refused)
            )
        self.sam, self.cfn, self.folders = sam, cfn, folders
        params: dict[str, Any] = parameter_defaults(sam, self.overrides)
        for name, spec in sam.get("Parameters", {}).items():
            if spec.get("Type") == "CommaDelimitedList" and isinstance(params.get(name), str):
                params[name] = [p.strip() for p in params[name].split(",")]
        params.update(
            {
                "AWS::StackName": self.stack_name,
                "AWS::Region": self.region,
                "AWS::AccountId": self.account_id,
                "AWS::Partition": "aws",
                "AWS::URLSuffix": "amazonaws.com",
                "AWS::StackId": f"arn:aws:cloudformation:{self.region}:{self.account_id}:stack/{self.stack_name}/local",
                "AWS::NotificationARNs": [],
            }
        )
        self.result = Provisioned(self.stack_name, self.region, self.account_id, params)
        self.params = params
        self.mappings = cfn.get("Mappings", {})
        self.conditions_src = cfn.get("Conditions", {})
        self.conditions: dict[str, bool] = {}

        self.client("s3").create_bucket(Bucket=CODE_BUCKET)
        pending = dict(cfn["Resources"])
        while pending:
            progressed = False
            for logical, resource in list(pending.items()):
                if any(dep in pending for dep in self._depends_on(resource)):
                    continue
                try:
                    self._create(logical, resource)
                except NotReady:
                    continue
                del pending[logical]
                progressed = True
            if not progressed:
                raise RuntimeError(f"cannot provision (unresolvable references or a cycle): {sorted(pending)}")
        for name, output in cfn.get("Outputs", {}).items():
            if "Condition" in output and not self._condition(output["Condition"]):
                continue
            value = str(self.resolve(output["Value"]))
            placeholders = [f"local-{k}" for k, v in self.result.physical.items() if v.get("placeholder")]
            if any(p in value for p in placeholders):
                log.info("output %s is not available locally (it names a resource that is not emulated)", name)
                continue
            self.result.outputs[name] = value
        return self.result

    @staticmethod
    def _depends_on(resource: dict[str, Any]) -> list[str]:
        deps = resource.get("DependsOn", [])
        return [deps] if isinstance(deps, str) else list(deps)

    # ---------------------------------------------------------------- intrinsics
    def _condition(self, name: str) -> bool:
        if name not in self.conditions:
            self.conditions[name] = bool(self.resolve(self.conditions_src[name]))
        return self.conditions[name]

    def _ref(self, name: str) -> Any:
        if name in self.params:
            return self.params[name]
        if name in self.result.physical:
            return self.result.physical[name]["Ref"]
        if name in self.cfn["Resources"]:
            raise NotReady(name)
        raise KeyError(f"Ref to unknown name {name}")

    def _getatt(self, name: str, attribute: str) -> Any:
        if name not in self.result.physical:
            if name in self.cfn["Resources"]:
                raise NotReady(name)
            raise KeyError(f"GetAtt of unknown resource {name}")
        attrs = self.result.physical[name]["Attrs"]
        if self.result.physical[name].get("placeholder"):
            return f"local-{name}-{attribute}"
        if attribute not in attrs:
            raise KeyError(f"{name} ({self.result.physical[name]['Type']}) has no attribute {attribute} locally")
        return attrs[attribute]

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            token = match[1]
            if token.startswith("!"):
                return "${" + token[1:] + "}"
            if token in variables:
                return str(variables[token])
            if "." in token and not token.startswith("AWS::"):
                resource, attribute = token.split(".", 1)
                return str(self._getatt(resource, attribute))
            return str(self._ref(token))

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return NO_VALUE if arg == "AWS::NoValue" else self._ref(arg)
            if key == "Fn::GetAtt":
                name, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
                return self._getatt(name, self.resolve(attribute))
            if key == "Fn::Sub":
                if isinstance(arg, str):
                    return self._sub(arg, {})
                text, variables = arg
                return self._sub(text, {k: self.resolve(v) for k, v in variables.items()})
            if key == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self._condition(name) else no)
            if key == "Fn::Equals":
                a, b = (self.resolve(x) for x in arg)
                return str(a) == str(b)
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(x) for x in arg)
            if key == "Fn::Or":
                return any(self.resolve(x) for x in arg)
            if key == "Condition":
                return self._condition(arg)
            if key == "Fn::FindInMap":
                mapping, first, second = (self.resolve(x) for x in arg[:3])
                return self.mappings[mapping][first][second]
            if key == "Fn::Select":
                index, items = self.resolve(arg[0]), self.resolve(arg[1])
                return items[int(index)]
            if key == "Fn::Join":
                delimiter, items = arg
                return str(delimiter).join(str(x) for x in self.resolve(items))
            if key == "Fn::Split":
                delimiter, text = arg
                if not isinstance(delimiter, str):  # CloudFormation: "you can't use any functions" in the delimiter
                    raise TemplateRulesFailed(
                        f"Template error: Fn::Split's delimiter must be a string, not {json.dumps(delimiter)[:200]}"
                    )
                return str(self.resolve(text)).split(delimiter)
            if key == "Fn::GetAZs":
                return [f"{self.region}{s}" for s in "abc"]
            if key == "Fn::Base64":
                import base64

                return base64.b64encode(str(self.resolve(arg)).encode()).decode()
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    # ---------------------------------------------------------------- resources
    def _name(self, logical: str, limit: int = 64, lower: bool = False) -> str:
        name = f"{self.stack_name}-{logical}"
        return (name.lower() if lower else name)[:limit]

    def _arn(self, service: str, resource: str) -> str:
        return f"arn:aws:{service}:{self.region}:{self.account_id}:{resource}"

    def _record(self, logical: str, rtype: str, ref: Any, *, placeholder: bool = False, **attrs: Any) -> None:
        self.result.physical[logical] = {"Type": rtype, "Ref": ref, "Attrs": attrs, "placeholder": placeholder}

    def _create(self, logical: str, resource: dict[str, Any]) -> None:
        rtype = resource["Type"]
        if "Condition" in resource and not self._condition(resource["Condition"]):
            self.result.skipped.append((logical, rtype, f"condition {resource['Condition']} is false"))
            self._record(logical, rtype, NO_VALUE)
            return
        if rtype in SKIPPED:
            self.result.skipped.append((logical, rtype, SKIPPED[rtype]))
            self._record(logical, rtype, f"local-{logical}", placeholder=True)
            return
        handler: Callable[[str, dict[str, Any]], None] | None = getattr(
            self, "_create_" + rtype.replace("AWS::", "").replace("::", "_"), None
        )
        if handler is None:
            reason = "no local emulation for this resource type"
            log.warning("skipping %s (%s): %s", logical, rtype, reason)
            self.result.skipped.append((logical, rtype, reason))
            self._record(logical, rtype, f"local-{logical}", placeholder=True)
            return
        props = self.resolve(resource.get("Properties", {}))  # raises NotReady before any side effect
        handler(logical, props)
        log.debug("created %s (%s)", logical, rtype)

    def _create_IAM_Role(self, logical: str, props: dict[str, Any]) -> None:
        """The role with its trust policy, inline policies and managed policies: the local AWS enforces them.

        AWS managed policies (``arn:aws:iam::aws:policy/...``) are moto's bundled copies (loaded by the stack with
        MOTO_IAM_LOAD_MANAGED_POLICIES); one moto does not know fails provisioning rather than being dropped.
        """
        name = props.get("RoleName") or self._name(logical)
        extra = {k: props[k] for k in ("Path", "MaxSessionDuration", "Description") if k in props}
        arn = self.call(
            "iam",
            "create_role",
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(props["AssumeRolePolicyDocument"]),
            **extra,
        )["Role"]["Arn"]
        for policy in props.get("Policies", []):
            # AWS accepts a document without Version (it then means 2008-10-17: no policy variables, which the
            # template does not use); moto refuses one, so state the version the statements are written in.
            document = {"Version": "2012-10-17", **policy["PolicyDocument"]}
            self.call(
                "iam",
                "put_role_policy",
                RoleName=name,
                PolicyName=policy["PolicyName"],
                PolicyDocument=json.dumps(document),
            )
        for policy_arn in props.get("ManagedPolicyArns", []):
            self.call("iam", "attach_role_policy", RoleName=name, PolicyArn=policy_arn)
        self._record(logical, "AWS::IAM::Role", name, Arn=arn, RoleId=name)

    def _create_Lambda_Permission(self, logical: str, props: dict[str, Any]) -> None:
        """Recorded, not sent: the local services that invoke functions are the stack itself (invoke_permissions)."""
        function = str(props["FunctionName"])
        arn = function if function.startswith("arn:") else self._arn("lambda", f"function:{function}")
        self.result.invoke_permissions.setdefault(str(props["Principal"]), []).append(arn)
        self._record(logical, "AWS::Lambda::Permission", f"local-{logical}")

    def _create_SNS_TopicPolicy(self, logical: str, props: dict[str, Any]) -> None:
        for topic in props["Topics"]:
            self.call(
                "sns",
                "set_topic_attributes",
                TopicArn=topic,
                AttributeName="Policy",
                AttributeValue=json.dumps(props["PolicyDocument"]),
            )
        self._record(logical, "AWS::SNS::TopicPolicy", f"local-{logical}")

    def _create_SQS_QueuePolicy(self, logical: str, props: dict[str, Any]) -> None:
        for queue_url in props["Queues"]:
            self.call(
                "sqs",
                "set_queue_attributes",
                QueueUrl=queue_url,
                Attributes={"Policy": json.dumps(props["PolicyDocument"])},
            )
        self._record(logical, "AWS::SQS::QueuePolicy", f"local-{logical}")

    def _create_S3_BucketPolicy(self, logical: str, props: dict[str, Any]) -> None:
        self.call("s3", "put_bucket_policy", Bucket=props["Bucket"], Policy=json.dumps(props["PolicyDocument"]))
        self._record(logical, "AWS::S3::BucketPolicy", f"local-{logical}")

    def _create_Logs_LogGroup(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("LogGroupName") or self._name(logical, 512)
        self.call("logs", "create_log_group", logGroupName=name)
        if "RetentionInDays" in props:
            self.call("logs", "put_retention_policy", logGroupName=name, retentionInDays=props["RetentionInDays"])
        self._record(logical, "AWS::Logs::LogGroup", name, Arn=self._arn("logs", f"log-group:{name}:*"))

    def _create_S3_Bucket(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("BucketName") or self._name(logical, 63, lower=True)
        self.call("s3", "create_bucket", Bucket=name)
        if "BucketEncryption" in props:
            self.call(
                "s3",
                "put_bucket_encryption",
                Bucket=name,
                ServerSideEncryptionConfiguration={
                    "Rules": [
                        {
                            "ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"],
                            **({"BucketKeyEnabled": rule["BucketKeyEnabled"]} if "BucketKeyEnabled" in rule else {}),
                        }
                        for rule in props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
                    ]
                },
            )
        if "VersioningConfiguration" in props:
            self.call(
                "s3", "put_bucket_versioning", Bucket=name, VersioningConfiguration=props["VersioningConfiguration"]
            )
        if "PublicAccessBlockConfiguration" in props:
            self.call(
                "s3",
                "put_public_access_block",
                Bucket=name,
                PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"],
            )
        if "OwnershipControls" in props:
            self.call("s3", "put_bucket_ownership_controls", Bucket=name, OwnershipControls=props["OwnershipControls"])
        if "LifecycleConfiguration" in props:
            rules = [_lifecycle_rule(rule) for rule in props["LifecycleConfiguration"].get("Rules", [])]
            self.optional(
                f"{logical} lifecycle rules",
                lambda: self.call(
                    "s3", "put_bucket_lifecycle_configuration", Bucket=name, LifecycleConfiguration={"Rules": rules}
                ),
            )
        notification = props.get("NotificationConfiguration") or {}
        config: dict[str, Any] = {}
        for cfn_key, api_key, target in (
            ("LambdaConfigurations", "LambdaFunctionConfigurations", "LambdaFunctionArn"),
            ("QueueConfigurations", "QueueConfigurations", "QueueArn"),
            ("TopicConfigurations", "TopicConfigurations", "TopicArn"),
        ):
            entries = []
            for entry in notification.get(cfn_key, []):
                item = {
                    target: entry.get("Function") or entry.get("Queue") or entry.get("Topic"),
                    "Events": [entry["Event"]],
                }
                if "Filter" in entry:
                    item["Filter"] = {"Key": {"FilterRules": entry["Filter"]["S3Key"]["Rules"]}}
                entries.append(item)
            if entries:
                config[api_key] = entries
        if config:
            self.call("s3", "put_bucket_notification_configuration", Bucket=name, NotificationConfiguration=config)
        self._record(
            logical,
            "AWS::S3::Bucket",
            name,
            Arn=f"arn:aws:s3:::{name}",
            DomainName=f"{name}.s3.amazonaws.com",
            RegionalDomainName=f"{name}.s3.{self.region}.amazonaws.com",
        )

    def _create_DynamoDB_Table(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("TableName") or self._name(logical, 255)
        args = {
            k: props[k]
            for k in (
                "AttributeDefinitions",
                "KeySchema",
                "BillingMode",
                "GlobalSecondaryIndexes",
                "LocalSecondaryIndexes",
                "ProvisionedThroughput",
                "StreamSpecification",
                "SSESpecification",
            )
            if k in props
        }
        if "SSESpecification" in args:
            args["SSESpecification"] = {"Enabled": bool(args["SSESpecification"].get("SSEEnabled"))}
        table = self.call("dynamodb", "create_table", TableName=name, **args)["TableDescription"]
        if ttl := props.get("TimeToLiveSpecification"):
            self.call("dynamodb", "update_time_to_live", TableName=name, TimeToLiveSpecification=ttl)
        if pitr := props.get("PointInTimeRecoverySpecification"):
            self.call(
                "dynamodb",
                "update_continuous_backups",
                TableName=name,
                PointInTimeRecoverySpecification=pitr,
            )
        self._record(
            logical, "AWS::DynamoDB::Table", name, Arn=table["TableArn"], StreamArn=table.get("LatestStreamArn")
        )

    def _create_SNS_Topic(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("TopicName") or self._name(logical, 256)
        attributes = {k: str(props[k]) for k in ("KmsMasterKeyId", "DisplayName", "FifoTopic") if k in props}
        arn = self.call("sns", "create_topic", Name=name, Attributes=attributes)["TopicArn"]
        for sub in props.get("Subscription", []):
            self.call("sns", "subscribe", TopicArn=arn, Protocol=sub["Protocol"], Endpoint=sub["Endpoint"])
        self._record(logical, "AWS::SNS::Topic", arn, TopicArn=arn, TopicName=name)

    def _create_SNS_Subscription(self, logical: str, props: dict[str, Any]) -> None:
        attributes = {
            key: json.dumps(props[key]) if isinstance(props[key], dict) else str(props[key]).lower()
            if isinstance(props[key], bool) else str(props[key])
            for key in ("RedrivePolicy", "FilterPolicy", "FilterPolicyScope", "RawMessageDelivery")
            if key in props
        }  # fmt: skip
        arn = self.call(
            "sns",
            "subscribe",
            TopicArn=props["TopicArn"],
            Protocol=props["Protocol"],
            Endpoint=props["Endpoint"],
            Attributes=attributes,
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
        self._record(logical, "AWS::SNS::Subscription", arn, Arn=arn)

    def _create_SecretsManager_Secret(self, logical: str, props: dict[str, Any]) -> None:
        import secrets
        import string

        name = props.get("Name") or self._name(logical, 512)
        value = props.get("SecretString")
        if value is None:
            generate = props.get("GenerateSecretString") or {}
            length = int(generate.get("PasswordLength", 32))
            if generate.get("ExcludePunctuation"):  # as Secrets Manager: letters and digits only
                alphabet = string.ascii_letters + string.digits
                random = "".join(secrets.choice(alphabet) for _ in range(length))
            else:
                random = secrets.token_urlsafe(length)
            key = generate.get("GenerateStringKey")
            value = (
                json.dumps({**json.loads(generate.get("SecretStringTemplate", "{}")), key: random}) if key else random
            )
        arn = self.call("secretsmanager", "create_secret", Name=name, SecretString=value)["ARN"]
        self._record(logical, "AWS::SecretsManager::Secret", arn, Id=arn)

    def _create_SQS_Queue(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("QueueName") or self._name(logical, 80)
        attributes = {
            k: json.dumps(v) if isinstance(v, dict) else (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in props.items()
            if k not in ("QueueName", "Tags")
        }
        url = self.call("sqs", "create_queue", QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = self._arn("sqs", name)
        self._record(logical, "AWS::SQS::Queue", url, Arn=arn, QueueName=name, QueueUrl=url)

    def _create_Lambda_LayerVersion(self, logical: str, props: dict[str, Any]) -> None:
        folder = self.folders[props["Content"]["S3Key"]]
        name = props.get("LayerName") or self._name(logical)
        arn = self.call(
            "lambda",
            "publish_layer_version",
            LayerName=name,
            Content={"ZipFile": _zip_dir(folder)},
            CompatibleRuntimes=props.get("CompatibleRuntimes", []),
        )["LayerVersionArn"]
        self._record(logical, "AWS::Lambda::LayerVersion", arn, LayerVersionArn=arn, folder=str(folder))

    def _create_Lambda_Function(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("FunctionName") or self._name(logical)
        folder = self.folders[props["Code"]["S3Key"]]
        layer_dirs = []
        for layer_arn in props.get("Layers", []):
            owner = next((v for v in self.result.physical.values() if v["Ref"] == layer_arn), None)
            if owner and owner["Attrs"].get("folder"):
                layer_dirs.append(owner["Attrs"]["folder"])
        args = {
            k: props[k]
            for k in (
                "Runtime",
                "Handler",
                "Description",
                "Timeout",
                "MemorySize",
                "Environment",
                "Layers",
                "Architectures",
                "TracingConfig",
                "LoggingConfig",
                "EphemeralStorage",
            )
            if k in props
        }
        if "Environment" in args:
            args["Environment"] = {"Variables": {k: str(v) for k, v in args["Environment"]["Variables"].items()}}
        arn = self.call(
            "lambda",
            "create_function",
            FunctionName=name,
            Role=props["Role"],
            Code={"ZipFile": _zip_dir(folder)},
            **args,
        )["FunctionArn"]
        self.result.functions[name] = {"logical_id": logical, "code_dir": str(folder), "layer_dirs": layer_dirs}
        self._record(logical, "AWS::Lambda::Function", name, Arn=arn)

    def _create_Lambda_EventInvokeConfig(self, logical: str, props: dict[str, Any]) -> None:
        args = {
            k: props[k] for k in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig") if k in props
        }
        self.call("lambda", "put_function_event_invoke_config", FunctionName=props["FunctionName"], **args)
        self._record(logical, "AWS::Lambda::EventInvokeConfig", f"local-{logical}")

    def _create_Lambda_EventSourceMapping(self, logical: str, props: dict[str, Any]) -> None:
        uuid_ = self.call("lambda", "create_event_source_mapping", **props)["UUID"]
        self._record(logical, "AWS::Lambda::EventSourceMapping", uuid_)

    def _create_Events_Rule(self, logical: str, props: dict[str, Any]) -> None:
        """A schedule rule is created in the local EventBridge and run by the local scheduler (``schedules.py``).

        A pattern rule is skipped: its only source in this template is Step Functions' execution status change
        events, which moto does not emit (WorkflowEnded is exercised in-process, tests/integration/pipeline).
        """
        if "ScheduleExpression" not in props:
            self.result.skipped.append(
                (logical, "AWS::Events::Rule", "pattern rule: moto emits no Step Functions status-change events")
            )
            self._record(logical, "AWS::Events::Rule", f"local-{logical}", placeholder=True, Arn=f"local-{logical}")
            return
        name = props.get("Name") or self._name(logical)
        args = {k: props[k] for k in ("Description", "State") if k in props}
        arn = self.call("events", "put_rule", Name=name, ScheduleExpression=props["ScheduleExpression"], **args)[
            "RuleArn"
        ]
        targets = [{k: t[k] for k in ("Id", "Arn", "Input") if k in t} for t in props["Targets"]]
        self.call("events", "put_targets", Rule=name, Targets=targets)
        if props.get("State", "ENABLED") == "ENABLED":
            self.result.schedules.append(
                {"rule_arn": arn, "expression": props["ScheduleExpression"], "targets": [t["Arn"] for t in targets]}
            )
        self._record(logical, "AWS::Events::Rule", name, Arn=arn)

    def _create_StepFunctions_StateMachine(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("StateMachineName") or self._name(logical, 80)
        if "DefinitionS3Location" in props:
            text = self.folders[props["DefinitionS3Location"]["Key"]].read_text()
        elif "DefinitionString" in props:
            text = props["DefinitionString"]
        else:
            text = json.dumps(props["Definition"])
        substitutions = {k: str(v) for k, v in (props.get("DefinitionSubstitutions") or {}).items()}
        definition = render_definition(text, substitutions)
        arn = self.call(
            "stepfunctions",
            "create_state_machine",
            name=name,
            definition=json.dumps(definition),
            roleArn=props["RoleArn"],
            type=props.get("StateMachineType", "STANDARD"),
        )["stateMachineArn"]
        self._record(logical, "AWS::StepFunctions::StateMachine", arn, Arn=arn, Name=name)

    def _create_SageMaker_Model(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("ModelName") or self._name(logical, 63)
        args = {k: props[k] for k in ("PrimaryContainer", "Containers", "ExecutionRoleArn", "VpcConfig") if k in props}
        arn = _sagemaker_arn(self.call("sagemaker", "create_model", ModelName=name, **args)["ModelArn"])
        container = props.get("PrimaryContainer") or (props.get("Containers") or [{}])[0]
        self.result.models[name] = {k: str(v) for k, v in (container.get("Environment") or {}).items()}
        self._record(logical, "AWS::SageMaker::Model", arn, ModelName=name)

    def _create_SageMaker_EndpointConfig(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("EndpointConfigName") or self._name(logical, 63)
        args = {
            k: props[k]
            for k in ("ProductionVariants", "AsyncInferenceConfig", "DataCaptureConfig", "KmsKeyId")
            if k in props
        }
        arn = _sagemaker_arn(
            self.call("sagemaker", "create_endpoint_config", EndpointConfigName=name, **args)["EndpointConfigArn"]
        )
        self._record(logical, "AWS::SageMaker::EndpointConfig", arn, EndpointConfigName=name)

    def _create_SageMaker_Endpoint(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("EndpointName") or self._name(logical, 63)
        arn = self.call(
            "sagemaker", "create_endpoint", EndpointName=name, EndpointConfigName=props["EndpointConfigName"]
        )["EndpointArn"]
        arn = _sagemaker_arn(arn)
        self._record(logical, "AWS::SageMaker::Endpoint", arn, EndpointName=name)

    def _create_ApiGatewayV2_Api(self, logical: str, props: dict[str, Any]) -> None:
        """The HTTP API's routes (from its OpenAPI body) become the local front door's routing table."""
        body = props.get("Body") or {}
        for path, methods in (body.get("paths") or {}).items():
            for method, spec in methods.items():
                integration = spec.get("x-amazon-apigateway-integration") or {}
                match = re.search(r"functions/(arn:aws:lambda:[^/]+)/invocations", str(integration.get("uri", "")))
                if not match:
                    continue
                verb = "ANY" if method == "x-amazon-apigateway-any-method" else method.upper()
                auth = "AWS_IAM" if any("AWS_IAM" in s for s in spec.get("security", [])) else "NONE"
                self.result.routes.append(
                    Route(verb, path, match[1].split(":")[6], str(integration.get("payloadFormatVersion", "2.0")), auth)
                )
        self._record(logical, "AWS::ApiGatewayV2::Api", "local", ApiEndpoint="http://local")
