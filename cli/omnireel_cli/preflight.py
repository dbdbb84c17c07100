"""``omnireel preflight``: everything that would make ``sam deploy`` fail after the endpoints started, checked first.

A stack that fails at the load balancer, a bucket name or a scalable target rolls back only after its SageMaker
endpoints have spent 20-60 minutes starting. ``make deploy`` runs this before ``sam deploy``; it checks

- the template's ``Rules`` with the profile's parameters (``omnireel_local.cfn_rules``: what CloudFormation itself
  checks before it creates anything),
- names: the stack name (lower case, <= 128), and every name the template derives from it - the inbox bucket
  ``<stack>-inbox-<account>-<region>`` must fit 63 characters, the endpoint names 63 - resolved from template.yaml
  itself, so a changed name expression is checked as written,
- with the target account (skipped with ``--offline``): the DLC image tag exists in the region's registry
  (``ecr:BatchGetImage``, the call a pull makes), and with voice on, the subnets exist in ``VpcId`` (the public ones
  in two or more AZs), the certificate is ISSUED in the region and the relay image exists in this account's ECR, and
  the "<type> for endpoint usage" quotas cover every instance pool member and the video endpoint's maximum.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnireel_local import cfn_rules
from omnireel_template import ROOT, load_template

PINNED_DLC_REPOSITORY = "vllm"
PINNED_DLC_TAG = "omni-sagemaker-cuda-v1.6"
_STACK_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_ECR_URI = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[^:@]+)(?::(?P<tag>[^@]+)|@(?P<digest>sha256:[0-9a-f]{64}))$"
)
PLACEHOLDER_ACCOUNT = "123456789012"  # only the length matters for names (every account id has 12 digits)


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    skipped: bool = False  # not checked (offline, no permission): never a failure, but shown as SKIP


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, ok: bool, detail: str, *, skipped: bool = False) -> None:
        self.findings.append(Finding(check, ok, detail, skipped))

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def render(self) -> str:
        lines = [f"{'SKIP' if f.skipped else 'PASS' if f.ok else 'FAIL'}  {f.check}: {f.detail}" for f in self.findings]
        failed = sum(not f.ok for f in self.findings)
        lines.append("preflight: OK" if not failed else f"preflight: {failed} problem(s) - fix them before sam deploy")
        return "\n".join(lines)


# ---------------------------------------------------------------- parameters
def profile(config_env: str, samconfig: Path = ROOT / "samconfig.toml") -> tuple[str, dict[str, str]]:
    """(stack name, parameter overrides) of a samconfig.toml profile (``dev`` / ``prod``)."""
    config = tomllib.loads(samconfig.read_text())
    try:
        deploy = config[config_env]["deploy"]["parameters"]
    except KeyError:
        raise ValueError(f"samconfig.toml has no [{config_env}.deploy.parameters] profile") from None
    overrides = deploy.get("parameter_overrides", [])
    if isinstance(overrides, str):
        overrides = overrides.split()
    return str(deploy.get("stack_name", "")), dict(item.split("=", 1) for item in overrides)


# ---------------------------------------------------------------- names derived from the stack name
def resolve_name(expr: Any, values: Mapping[str, Any]) -> str:
    """Resolve a name expression of template.yaml (Ref, Fn::Sub, Fn::Join, Fn::Split) with parameter values."""
    if isinstance(expr, str):
        return expr
    ((key, arg),) = expr.items()
    if key == "Ref":
        return values[arg]
    if key == "Fn::Sub":
        text, variables = (arg, {}) if isinstance(arg, str) else arg
        local = {**values, **{k: resolve_name(v, values) for k, v in variables.items()}}
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(local[m[1]]), text)
    if key == "Fn::Join":
        delimiter, items = arg
        return delimiter.join(_resolve_list(items, values))
    raise ValueError(f"cannot resolve {key} in a name")


def _resolve_list(items: Any, values: Mapping[str, Any]) -> list[str]:
    if isinstance(items, dict) and "Fn::Split" in items:
        delimiter, text = items["Fn::Split"]
        return resolve_name(text, values).split(delimiter)
    return [resolve_name(item, values) for item in items]


def derived_names(
    template: Mapping[str, Any], stack: str, region: str, parameters: Mapping[str, str], account: str
) -> dict[str, tuple[str, int]]:
    """{what: (name, limit)} for every name template.yaml builds from the stack name and that AWS caps."""
    values = {
        **cfn_rules.parameter_values(template, parameters),
        "AWS::StackName": stack,
        "AWS::Region": region,
        "AWS::AccountId": account,
    }
    resources = template["Resources"]
    names: dict[str, tuple[str, int]] = {
        "inbox bucket": (resolve_name(resources["InboxBucket"]["Properties"]["BucketName"], values), 63)
    }
    for logical in ("ImageEndpoint", "VideoEndpoint", "TtsEndpoint"):
        expr = resources.get(logical, {}).get("Properties", {}).get("EndpointName")
        if expr is not None:
            names[f"{logical} name"] = (resolve_name(expr, values), 63)
    return names


def max_stack_name_length(template: Mapping[str, Any], region: str, parameters: Mapping[str, str]) -> int:
    """The longest stack name whose derived names all fit in ``region`` (account ids are always 12 digits)."""
    fits = 0
    for length in range(1, 129):
        names = derived_names(template, "a" * length, region, parameters, PLACEHOLDER_ACCOUNT)
        if any(len(name) > limit for name, limit in names.values()):
            break
        fits = length
    return fits


def check_names(report: Report, template: Mapping[str, Any], stack: str, region: str, params: Mapping[str, str],
                account: str) -> None:  # fmt: skip
    if not _STACK_NAME.match(stack) or len(stack) > 128:
        report.add(
            "stack name",
            False,
            f"{stack!r}: use lower-case letters, digits and hyphens, starting with a letter (the inbox bucket's "
            "name includes it, and bucket names are lower case)",
        )
        return
    limit = max_stack_name_length(template, region, params)
    too_long = {
        what: name for what, (name, cap) in derived_names(template, stack, region, params, account).items()
        if len(name) > cap
    }  # fmt: skip
    if too_long:
        detail = "; ".join(f"{what} {name!r} has {len(name)} characters" for what, name in too_long.items())
        report.add("stack name", False, f"{stack!r} is too long for {region} (at most {limit} characters): {detail}")
    else:
        report.add("stack name", True, f"{stack!r} ({len(stack)} of at most {limit} characters in {region})")


# ---------------------------------------------------------------- the DLC image tag (issue 16 item 7)
def dlc_image(template: Mapping[str, Any], region: str, params: Mapping[str, str]) -> tuple[str, str, str]:
    """(registry account, repository, tag or digest) of the image every endpoint runs."""
    override = params.get("DlcImageUri") or str(template["Parameters"]["DlcImageUri"].get("Default", ""))
    if override:
        match = _ECR_URI.match(override)
        if not match:
            raise ValueError(f"DlcImageUri {override!r} is not an ECR image URI with a tag or digest")
        if match["region"] != region:
            raise ValueError(
                f"DlcImageUri is in {match['region']}, the stack in {region}: SageMaker pulls only from the "
                "endpoint's own region"
            )
        return match["account"], match["repository"], match["tag"] or match["digest"]
    mapping = template["Mappings"]["DlcRegistry"]
    if region not in mapping:
        raise ValueError(f"no pinned DLC registry account for {region}: set DlcImageUri")
    return mapping[region]["Account"], PINNED_DLC_REPOSITORY, PINNED_DLC_TAG


def image_check_command(account: str, repository: str, reference: str, region: str) -> str:
    """The exact AWS CLI command docs/operations.md gives for the same check."""
    key = "imageDigest" if reference.startswith("sha256:") else "imageTag"
    return (
        f"aws ecr batch-get-image --region {region} --registry-id {account} --repository-name {repository} "
        f"--image-ids {key}={reference} --query 'length(images)'"
    )


def check_image_exists(report: Report, ecr: Any, account: str, repository: str, reference: str, region: str) -> None:
    """ecr:BatchGetImage is what a pull does (the DLC registries allow it to every account); DescribeImages is not
    granted on AWS's registries, so this is the call that answers 'does the tag exist for me'."""
    from botocore.exceptions import BotoCoreError, ClientError

    key = "imageDigest" if reference.startswith("sha256:") else "imageTag"
    uri = f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}{'@' if key == 'imageDigest' else ':'}{reference}"
    try:
        answer = ecr.batch_get_image(registryId=account, repositoryName=repository, imageIds=[{key: reference}])
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "RepositoryNotFoundException":
            report.add("dlc image", False, f"{uri}: the repository does not exist in {region}")
        else:
            report.add("dlc image", False, f"{uri}: could not check ({code}: {exc}); run: "
                       + image_check_command(account, repository, reference, region))  # fmt: skip
        return
    except BotoCoreError as exc:
        report.add("dlc image", False, f"{uri}: could not reach ECR in {region}: {exc}")
        return
    if answer.get("images"):
        report.add("dlc image", True, f"{uri} exists in {region}")
        return
    reasons = ", ".join(f.get("failureCode", "?") for f in answer.get("failures", [])) or "no image"
    report.add(
        "dlc image",
        False,
        f"{uri} is not in {region} ({reasons}): the endpoints would fail after ~10 minutes pulling it. Pick a tag "
        "that exists (DlcImageUri) or another region.",
    )


# ---------------------------------------------------------------- instance pools
_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")


def check_pools(report: Report, values: Mapping[str, Any]) -> None:
    """What Rules cannot see in a pool list: more than 4 entries (the template reads 4 slots: a 5th is dropped
    without a word), a malformed type (CreateEndpointConfig refuses it while other endpoints are starting), a
    repeated type (it adds no fallback: almost certainly a typo)."""
    problems = []
    for parameter in ("ImageInstanceTypes", "TtsInstanceTypes"):
        pools = [str(p) for p in values[parameter]]
        if len(pools) > 4:
            problems.append(f"{parameter} has {len(pools)} entries; the template uses at most 4")
        bad = [p for p in pools if p and not _INSTANCE_TYPE.match(p)]
        if bad:
            problems.append(f"{parameter}: {', '.join(bad)} is not an ml.* instance type")
        if len(set(pools)) != len(pools):
            problems.append(f"{parameter} repeats a type")
    report.add("instance pools", not problems, "; ".join(problems) or "1-4 distinct ml.* types per endpoint")


# ---------------------------------------------------------------- endpoint quotas
def quota_needs(values: Mapping[str, Any]) -> dict[str, int]:
    """Instances per type the endpoints may hold at once. SageMaker checks the quota of every type in a variant's
    instance pools, not only the one it gets: each pool member needs room for that endpoint's instance."""
    needs: dict[str, int] = {}
    pools = list(values["ImageInstanceTypes"]) + (list(values["TtsInstanceTypes"]) if values["EnableVoice"] == "true"
                                                   else [])  # fmt: skip
    for instance_type in pools:
        needs[instance_type] = needs.get(instance_type, 0) + 1
    video = str(values["VideoInstanceType"])
    needs[video] = needs.get(video, 0) + max(1, int(values["VideoMaxCapacity"]))
    return needs


def _quota_values(quotas: Any) -> dict[str, float]:
    found: dict[str, float] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):  # applied values win
        for page in quotas.get_paginator(operation).paginate(ServiceCode="sagemaker"):
            for quota in page.get("Quotas", []):
                name = str(quota.get("QuotaName", ""))
                if name.endswith(" for endpoint usage"):
                    found[name.removesuffix(" for endpoint usage")] = float(quota.get("Value", 0))
    return found


def check_quotas(report: Report, quotas: Any, values: Mapping[str, Any]) -> None:
    """A zero quota fails CreateEndpoint only after the other endpoints started (new accounts have 0 for GPUs)."""
    from botocore.exceptions import BotoCoreError, ClientError

    needs = quota_needs(values)
    try:
        have = _quota_values(quotas)
    except (BotoCoreError, ClientError) as exc:
        report.add("endpoint quotas", True, f"not checked ({exc}); request: " + ", ".join(
            f"{t} for endpoint usage >= {n}" for t, n in sorted(needs.items())), skipped=True)  # fmt: skip
        return
    short = [f"{t} for endpoint usage is {have[t]:.0f}, needs {n}" for t, n in sorted(needs.items())
             if t in have and have[t] < n]  # fmt: skip
    unknown = sorted(t for t in needs if t not in have)
    detail = "; ".join(short) or ", ".join(f"{t} >= {n}" for t, n in sorted(needs.items()))
    if unknown:
        detail += f" (no quota found for {', '.join(unknown)}: check Service Quotas)"
    report.add("endpoint quotas", not short, detail + ("" if short else " (minus what other endpoints use)"))


# ---------------------------------------------------------------- voice network (what Rules cannot look up)
def check_voice(
    report: Report, clients: Callable[[str], Any], region: str, params: Mapping[str, str], account: str | None = None
) -> None:
    from botocore.exceptions import ClientError

    vpc = params.get("VpcId", "")
    public = [s for s in params.get("PublicSubnetIds", "").split(",") if s]
    relay = [s for s in params.get("RelaySubnetIds", "").split(",") if s]
    try:
        found = clients("ec2").describe_subnets(SubnetIds=sorted(set(public + relay)))["Subnets"]
    except ClientError as exc:
        report.add("voice subnets", False, f"{exc.response.get('Error', {}).get('Code')}: {exc}")
        found = []
    else:
        by_id = {s["SubnetId"]: s for s in found}
        elsewhere = sorted(i for i, s in by_id.items() if s.get("VpcId") != vpc)
        zones = {by_id[s]["AvailabilityZone"] for s in public if s in by_id}
        problems = []
        if elsewhere:
            problems.append(f"{', '.join(elsewhere)} not in {vpc}")
        if len(zones) < 2:
            problems.append(f"PublicSubnetIds cover {len(zones)} availability zone(s); the load balancer needs 2")
        report.add("voice subnets", not problems, "; ".join(problems) or f"{len(public)} public subnets in "
                   f"{len(zones)} AZs, {len(relay)} relay subnets, all in {vpc}")  # fmt: skip
    arn = params.get("RelayCertificateArn", "")
    if f":acm:{region}:" not in arn:
        report.add("voice certificate", False, f"{arn!r} is not in {region} (the load balancer needs it there)")
    else:
        try:
            status = clients("acm").describe_certificate(CertificateArn=arn)["Certificate"]["Status"]
            report.add("voice certificate", status == "ISSUED", f"{arn}: {status}")
        except ClientError as exc:
            report.add("voice certificate", False, f"{arn}: {exc.response.get('Error', {}).get('Code')}")
    match = _ECR_URI.match(params.get("RelayImageUri", ""))
    if not match:
        report.add("relay image", False, f"RelayImageUri {params.get('RelayImageUri', '')!r} is not an ECR image URI")
    elif match["region"] != region or (account and match["account"] != account):
        report.add("relay image", False, f"RelayImageUri is in {match['account']}/{match['region']}; the relay's "
                   f"execution role pulls only from this account's ECR in {region}")  # fmt: skip
    else:
        check_image_exists(report, clients("ecr"), match["account"], match["repository"],
                           match["tag"] or match["digest"], region)  # fmt: skip
        report.findings[-1].check = "relay image"


def deployed_image_report(session: Any, stack: str, template: Mapping[str, Any] | None = None) -> Report:
    """The DLC tag check for a deployed stack (``omnireel smoke --stack``): the image its parameters name, in its
    region, still exists (a tag removed from the registry stops every scale-out and endpoint update)."""
    from botocore.exceptions import BotoCoreError, ClientError

    template = template if template is not None else load_template()
    region = session.region_name
    report = Report()
    try:
        described = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    except (BotoCoreError, ClientError) as exc:
        report.add("dlc image", False, f"cannot read stack {stack} in {region}: {exc}")
        return report
    params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in described.get("Parameters", [])}
    try:
        image = dlc_image(template, region, {k: v for k, v in params.items() if k == "DlcImageUri"})
    except ValueError as exc:
        report.add("dlc image", False, str(exc))
        return report
    check_image_exists(report, session.client("ecr"), *image, region)
    return report


# ---------------------------------------------------------------- entry point
def run(
    stack: str,
    region: str,
    parameters: Mapping[str, str],
    *,
    clients: Callable[[str], Any] | None = None,
    account: str | None = None,
    template: Mapping[str, Any] | None = None,
) -> Report:
    """All checks; ``clients=None`` = offline (template and names only)."""
    template = template if template is not None else load_template()
    params = dict(parameters)
    report = Report()
    unknown = cfn_rules.unknown_parameters(template, params)
    if unknown:
        report.add("parameters", False, unknown[0])
    constraints = cfn_rules.constraint_violations(template, params)
    report.add("parameter constraints", not constraints, "; ".join(constraints) or "every value is allowed")
    failures = cfn_rules.failed_assertions(template, params, stack_name=stack, region=region)
    report.add("template rules", not failures, "; ".join(failures) or f"{len(template.get('Rules', {}))} rules hold")
    comparisons = cfn_rules.comparison_violations(template, params)
    report.add(
        "parameter comparisons",
        not comparisons,
        "; ".join(comparisons) or "what Rules cannot compare holds (template Metadata: omnireel.ParameterComparisons)",
    )
    check_names(report, template, stack, region, params, account or PLACEHOLDER_ACCOUNT)
    check_pools(report, cfn_rules.parameter_values(template, params))
    try:
        image = dlc_image(template, region, params)
    except ValueError as exc:
        report.add("dlc image", False, str(exc))
        image = None
    if clients is None:
        report.add("endpoint quotas", True, "not checked (--offline)", skipped=True)
        if cfn_rules.parameter_values(template, params).get("EnableVoice") == "true":
            report.add("voice network", True, "subnets, certificate, relay image not checked (--offline)", skipped=True)
        if image:
            report.add("dlc image", True, "not checked (--offline); check with: " + image_check_command(*image, region),
                       skipped=True)  # fmt: skip
        return report
    if image:
        check_image_exists(report, clients("ecr"), *image, region)
    values = cfn_rules.parameter_values(template, params)
    if not constraints and not failures:
        check_quotas(report, clients("service-quotas"), values)
    if values.get("EnableVoice") == "true" and not failures:
        flat = {k: ",".join(v) if isinstance(v, list) else v for k, v in values.items()}
        check_voice(report, clients, region, flat, account)
    return report
