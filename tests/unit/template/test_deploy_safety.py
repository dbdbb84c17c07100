"""Issue 16: a deploy fails before the first resource is created, updates and teardown are safe.

The template's Rules are evaluated with ``omnireel_local.cfn_rules`` (the evaluator the local stack and
``omnireel preflight`` use); names are resolved from template.yaml's own expressions, so a changed expression is what
these tests check."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import botocore
import pytest

from omnireel_cli import preflight
from omnireel_local import cfn_rules
from omnireel_template import ROOT, load_template

VOICE = {
    "RelayImageUri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/omnireel-relay:abc1234",
    "RelayCertificateArn": "arn:aws:acm:us-east-1:111122223333:certificate/0b0e3c3e-1111-2222-3333-444455556666",
    "VpcId": "vpc-0123456789abcdef0",
    "PublicSubnetIds": "subnet-aaa,subnet-bbb",
    "RelaySubnetIds": "subnet-ccc",
}
# The functions CloudFormation allows in a Rules section (Template Reference, "Rule functions").
RULE_FUNCTIONS = {
    "Fn::And", "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn", "Fn::Equals", "Fn::Not", "Fn::Or",
    "Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll", "Ref",
}  # fmt: skip
# Kinds of resource that hold data (or the key to it): each follows RetainData (issue 27 item 1). Not in the set, on
# purpose: log groups (they expire by LogRetentionDays, and a retained group would collide with its fixed name on the
# next deploy of the same stack) and queues (messages in flight, not data: every consumer's work is on a record).
STATEFUL_TYPES = {"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SecretsManager::Secret", "AWS::KMS::Key"}
POLICIES = ("DeletionPolicy", "UpdateReplacePolicy")


@pytest.fixture(scope="module")
def sam() -> dict[str, Any]:
    return load_template()


def refused(sam: dict[str, Any], region: str = "us-east-1", **overrides: str) -> list[str]:
    return cfn_rules.constraint_violations(sam, overrides) + cfn_rules.failed_assertions(sam, overrides, region=region)


# ---------------------------------------------------------------- 1. validate early (Rules)
def test_rules_use_only_functions_cloudformation_allows_in_rules(sam: dict[str, Any]) -> None:
    used: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            used.update(k for k in node if k.startswith("Fn::") or k == "Ref")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for rule in sam["Rules"].values():
        walk(rule.get("RuleCondition"))
        walk([a["Assert"] for a in rule["Assertions"]])
    assert used <= RULE_FUNCTIONS, used - RULE_FUNCTIONS


def test_defaults_without_voice_and_full_voice_parameters_pass(sam: dict[str, Any]) -> None:
    assert refused(sam, EnableVoice="false") == []
    assert refused(sam, **VOICE) == []


@pytest.mark.parametrize("subnets", ["PublicSubnetIds", "RelaySubnetIds"])
@pytest.mark.parametrize("value", ["", "subnet-aaa,,subnet-bbb", ","])
def test_voice_refuses_missing_or_empty_subnet_entries(sam: dict[str, Any], subnets: str, value: str) -> None:
    # Before issue 16 only VpcId was checked: a forgotten subnet list failed at load balancer creation, after the
    # endpoints had started, and rolled them back.
    problems = refused(sam, **{**VOICE, subnets: value})
    assert any(subnets in p for p in problems), problems


def test_video_min_capacity_may_never_exceed_max(sam: dict[str, Any]) -> None:
    for maximum in range(1, 11):
        for minimum in range(0, 11):
            problems = refused(sam, EnableVoice="false", VideoMinCapacity=str(minimum), VideoMaxCapacity=str(maximum))
            assert bool(problems) == (minimum > maximum), (minimum, maximum, problems)


def test_rules_reference_only_parameters(sam: dict[str, Any]) -> None:
    """Pseudo parameters (AWS::Region...) in Rules are not documented as supported: a rule that CloudFormation could
    not evaluate would break every deploy. Region-dependent checks live in `omnireel preflight` instead."""
    refs = re.findall(r"'Ref': '([^']+)'", str(sam["Rules"]))
    assert refs and all(ref in sam["Parameters"] for ref in refs), refs


def test_pinned_image_needs_a_mapped_region_or_dlc_image_uri(sam: dict[str, Any]) -> None:
    report = preflight.run("omnireel-dev", "ap-southeast-5", {"EnableVoice": "false"})
    assert not report.ok and "set DlcImageUri" in report.render()
    uri = "111122223333.dkr.ecr.ap-southeast-5.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
    assert preflight.run("omnireel-dev", "ap-southeast-5", {"EnableVoice": "false", "DlcImageUri": uri}).ok


@pytest.mark.parametrize("pools", ["ml.g6.xlarge,,ml.g5.xlarge", ",ml.g6.xlarge"])
def test_instance_pool_lists_have_no_empty_entry(sam: dict[str, Any], pools: str) -> None:
    assert refused(sam, EnableVoice="false", ImageInstanceTypes=pools)
    assert refused(sam, EnableVoice="false", TtsInstanceTypes=pools)


def test_flux_klein_is_never_placed_on_a_16_gb_t4(sam: dict[str, Any]) -> None:
    problems = refused(sam, EnableVoice="false", ImageInstanceTypes="ml.g6.xlarge,ml.g4dn.xlarge")
    assert any("T4" in p for p in problems)
    # Another image model may choose its own pools; the TTS endpoint may use g4dn (its default list does).
    assert refused(sam, EnableVoice="false", ImageModelId="other/model", ImageInstanceTypes="ml.g4dn.xlarge") == []
    assert "ml.g4dn.xlarge" in sam["Parameters"]["TtsInstanceTypes"]["Default"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VideoInstanceType", "g6e.xlarge"),
        ("VpcId", "my-vpc"),
        ("RelayCertificateArn", "arn:aws:iam::111122223333:server-certificate/x"),
        ("RelayImageUri", "docker.io/omnireel/relay:latest"),
        ("RelayAllowedCidr", "0.0.0.0"),
        ("AlarmEmail", "oncall"),
        ("RetainData", "yes"),
    ],
)
def test_malformed_parameters_are_refused_by_their_constraints(sam: dict[str, Any], name: str, value: str) -> None:
    assert any(name in p for p in cfn_rules.constraint_violations(sam, {name: value}))


def test_a_parameter_the_template_does_not_declare_is_refused_with_the_closest_name(sam: dict[str, Any]) -> None:
    assert cfn_rules.unknown_parameters(sam, {"JobDeadlineSeconds": "60"}) == []
    [problem] = cfn_rules.unknown_parameters(sam, {"jobdeadlineseconds": "60", "Zzz": "1"})
    assert problem.startswith("Parameters: [Zzz, jobdeadlineseconds] do not exist in the template")
    assert "jobdeadlineseconds: did you mean JobDeadlineSeconds?" in problem and "Zzz:" not in problem


def test_the_local_stack_refuses_what_the_rules_refuse() -> None:
    """The local provisioner checks constraints and Rules before its first API call (no server needed to see it)."""
    from omnireel_local.provision import Provisioner, TemplateRulesFailed

    provisioner = Provisioner(
        "http://127.0.0.1:9", parameter_overrides={"VideoMinCapacity": "2", "VideoMaxCapacity": "1"}
    )
    with pytest.raises(TemplateRulesFailed, match="VideoMinCapacity must not exceed VideoMaxCapacity"):
        provisioner.run()


# ---------------------------------------------------------------- 2. names
def _all_regions() -> list[str]:
    data = json.loads((Path(botocore.__file__).parent / "data" / "endpoints.json").read_text())
    return sorted({region for partition in data["partitions"] for region in partition["regions"]})


def test_inbox_bucket_name_is_the_expression_preflight_checks(sam: dict[str, Any]) -> None:
    names = preflight.derived_names(sam, "omnireel-dev", "eu-west-1", {}, "111122223333")
    assert names["inbox bucket"] == ("omnireel-dev-inbox-111122223333-eu-west-1", 63)
    assert names["VideoEndpoint name"][0] == "omnireel-dev-video-ml-g6e-xlarge"


def test_stack_name_limit_over_the_longest_region_name(sam: dict[str, Any]) -> None:
    regions = _all_regions()
    longest = max(regions, key=lambda r: (len(r), r))
    assert len(longest) >= 14  # e.g. ap-southeast-5: botocore's partitions list it
    limit = preflight.max_stack_name_length(sam, longest, {})
    assert limit == 63 - len("-inbox-") - 12 - 1 - len(longest)
    assert preflight.max_stack_name_length(sam, "us-east-1", {}) == 34
    for stack, ok in (("a" * limit, True), ("a" * (limit + 1), False)):
        report = preflight.Report()
        preflight.check_names(report, sam, stack, longest, {}, "111122223333")
        assert report.ok is ok, report.render()
        bucket = preflight.derived_names(sam, stack, longest, {}, "111122223333")["inbox bucket"][0]
        assert (len(bucket) <= 63) is ok
    # The documented table matches the computation.
    ops = (ROOT / "docs" / "operations" / "deploy.md").read_text()
    assert "| `us-east-1` | 34 |" in ops and f"| `{longest}` (the longest) | {limit} |" in ops


@pytest.mark.parametrize("stack", ["Omnireel-dev", "omnireel_dev", "1omnireel"])
def test_stack_names_that_cannot_name_a_bucket_are_refused(sam: dict[str, Any], stack: str) -> None:
    report = preflight.Report()
    preflight.check_names(report, sam, stack, "us-east-1", {}, "111122223333")
    assert not report.ok


# ---------------------------------------------------------------- 3. updates
def _endpoint_names(sam: dict[str, Any], **params: str) -> dict[str, str]:
    names = preflight.derived_names(sam, "omnireel-prod", "us-east-1", params, "111122223333")
    return {k.split()[0]: v[0] for k, v in names.items() if k.endswith("Endpoint name")}


def test_a_new_video_instance_type_is_a_new_endpoint_and_nothing_else_renames_it(sam: dict[str, Any]) -> None:
    before = _endpoint_names(sam)
    after = _endpoint_names(sam, VideoInstanceType="ml.g6e.2xlarge")
    assert before["VideoEndpoint"] != after["VideoEndpoint"]  # EndpointName is replace-only: blue/green
    assert before["ImageEndpoint"] == after["ImageEndpoint"] and before["TtsEndpoint"] == after["TtsEndpoint"]
    for change in ({"VideoModelId": "x/y"}, {"DlcImageUri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/v:1"},
                   {"VideoMaxConcurrentInvocationsPerInstance": "2"}, {"InferenceAmiVersion": "other"}):  # fmt: skip
        assert _endpoint_names(sam, **change) == before, change


def test_video_endpoint_updates_keep_the_current_instance_count(sam: dict[str, Any]) -> None:
    props = sam["Resources"]["VideoEndpoint"]["Properties"]
    assert props["RetainAllVariantProperties"] is True
    assert "ExcludeRetainedVariantProperties" not in props


def test_autoscaling_follows_the_endpoint_through_a_replacement(sam: dict[str, Any]) -> None:
    resources = sam["Resources"]
    target = resources["VideoScalableTarget"]["Properties"]
    assert target["ResourceId"] == {"Fn::Sub": "endpoint/${VideoEndpoint.EndpointName}/variant/AllTraffic"}
    for policy in ("VideoBacklogScalingPolicy", "VideoWakeUpScalingPolicy"):
        # A fixed policy name would be a custom-named resource that cannot be replaced.
        assert "${VideoEndpoint.EndpointName}" in resources[policy]["Properties"]["PolicyName"]["Fn::Sub"]


def test_docs_say_what_each_parameter_change_does(sam: dict[str, Any]) -> None:
    text = (ROOT / "docs" / "operations" / "parameter-changes.md").read_text()
    section = text.split("# What a parameter change does to a live stack", 1)[1].split("\n## ", 1)[0]
    for name in sam["Parameters"]:
        assert f"`{name}`" in section, (
            f"parameter {name}: add it to the table in docs/operations/parameter-changes.md (what an update of it "
            "does to a live stack: in place, new executions only, replacement...; issue 16)"
        )


# ---------------------------------------------------------------- 4. logs
def test_state_machine_logs_under_vendedlogs(sam: dict[str, Any]) -> None:
    group = sam["Resources"]["StateMachineLogGroup"]["Properties"]["LogGroupName"]["Fn::Sub"]
    assert group.startswith("/aws/vendedlogs/states/")
    destinations = sam["Resources"]["PipelineStateMachine"]["Properties"]["Logging"]["Destinations"]
    assert destinations == [
        {"CloudWatchLogsLogGroup": {"LogGroupArn": {"Fn::GetAtt": ["StateMachineLogGroup", "Arn"]}}}
    ]


@pytest.mark.parametrize("kind", ["Image", "Video", "Tts"])
def test_endpoint_log_groups_exist_first_with_retention(sam: dict[str, Any], kind: str) -> None:
    resources = sam["Resources"]
    endpoint, group = resources[f"{kind}Endpoint"], resources[f"{kind}EndpointLogGroup"]
    assert endpoint["DependsOn"] == f"{kind}EndpointLogGroup"
    assert endpoint.get("Condition") == group.get("Condition")
    assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    values = {"AWS::StackName": "omnireel-prod", **cfn_rules.parameter_values(sam, {})}
    for params in ({}, {"VideoInstanceType": "ml.g5.2xlarge"}):
        values.update(params)
        name = preflight.resolve_name(endpoint["Properties"]["EndpointName"], values)
        assert preflight.resolve_name(group["Properties"]["LogGroupName"], values) == f"/aws/sagemaker/Endpoints/{name}"


# ---------------------------------------------------------------- 5. data outlives mistakes
def test_data_resources_are_retained_by_profile(sam: dict[str, Any]) -> None:
    assert sam["Transform"] == ["AWS::LanguageExtensions", "AWS::Serverless-2016-10-31"]
    assert sam["Conditions"]["RetainDataOnDelete"] == {"Fn::Equals": [{"Ref": "RetainData"}, "true"]}
    assert sam["Parameters"]["RetainData"]["Default"] == "true"  # a stack deployed without a profile keeps its data
    stateful = {logical: r for logical, r in sam["Resources"].items() if r["Type"] in STATEFUL_TYPES}
    assert {"BatchesTable", "WebhookSigningSecret", "JobsTable", "ArtifactsBucket", "InboxBucket"} <= set(stateful)
    for logical, resource in stateful.items():
        for attribute in POLICIES:
            if "Condition" in resource:  # see the next test: a static policy, its reason in the template
                assert resource.get(attribute) in ("Retain", "Delete"), (logical, attribute)
            else:
                assert resource.get(attribute) == {"Fn::If": ["RetainDataOnDelete", "Retain", "Delete"]}, (
                    logical,
                    attribute,
                )
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())

    def value(env: str) -> str:
        items = config[env]["deploy"]["parameters"]["parameter_overrides"]
        return dict(i.split("=", 1) for i in items)["RetainData"]

    assert (value("dev"), value("prod")) == ("false", "true")


def test_no_conditional_resource_has_an_intrinsic_deletion_policy(sam: dict[str, Any]) -> None:
    """Issue 27 item 2: `DeletionPolicy: !If` on a resource with a Condition is reported to fail under
    AWS::LanguageExtensions (CloudFormation language-discussion #124) and is not documented: every conditional
    resource's policies are plain strings."""
    conditional = {logical: r for logical, r in sam["Resources"].items() if "Condition" in r}
    assert {"AlarmTopicKey", "RelayTokenSecret"} <= set(conditional)
    offenders = [(logical, a) for logical, r in conditional.items() for a in POLICIES if isinstance(r.get(a), dict)]
    assert offenders == []


def test_destroy_reports_as_retained_exactly_what_follows_retain_data(sam: dict[str, Any]) -> None:
    from omnireel_template import retained_by_retain_data

    kept = retained_by_retain_data(sam)
    assert {"BatchesTable", "WebhookSigningSecret", "JobsTable", "ArtifactsBucket", "InboxBucket"} <= kept
    assert not kept & {"AlarmTopicKey", "RelayTokenSecret"}  # deleted in every profile


def test_destroy_keeps_retained_data_and_empties_only_a_dev_stack() -> None:
    import boto3
    from botocore.stub import Stubber

    from scripts.destroy_stack import retains_data

    cfn = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(cfn)
    created = "2026-12-01T00:00:00Z"
    for stack, parameters in (
        ("prod", [{"ParameterKey": "RetainData", "ParameterValue": "true"}]),
        ("dev", [{"ParameterKey": "RetainData", "ParameterValue": "false"}]),
        ("old", []),  # deployed before RetainData existed: its resources had the Delete default
    ):
        answer = {
            "StackName": stack,
            "CreationTime": created,
            "StackStatus": "CREATE_COMPLETE",
            "Parameters": parameters,
        }
        stubber.add_response("describe_stacks", {"Stacks": [answer]}, {"StackName": stack})
    with stubber:
        assert (retains_data(cfn, "prod"), retains_data(cfn, "dev"), retains_data(cfn, "old")) == (True, False, False)


# ---------------------------------------------------------------- 6. instance pools per model
def test_operations_gives_a_reason_for_every_pool_member(sam: dict[str, Any]) -> None:
    text = (ROOT / "docs" / "operations" / "quotas.md").read_text()
    section = text.split("## Instance pools per model", 1)[1].split("\n## ", 1)[0]
    for parameter in ("ImageInstanceTypes", "TtsInstanceTypes"):
        for instance_type in sam["Parameters"][parameter]["Default"].split(","):
            row = next((line for line in section.splitlines() if f"`{instance_type}`" in line), "")
            assert re.search(r"\d+ GB", row), f"{instance_type}: no memory reason in the pools table"
    assert "ml.g4dn.xlarge" not in sam["Parameters"]["ImageInstanceTypes"]["Default"]


def test_the_transformed_template_has_no_dependency_cycle() -> None:
    """CloudFormation refuses a template with circular dependencies only when the stack is created (cfn-lint on the
    SAM template does not see the ones SAM adds, e.g. a bucket's notification permission). An endpoint that depended
    on the inbox bucket would close one: bucket -> inbox function -> state machine -> generate_image -> endpoint."""
    from omnireel_local.provision import transform

    _, cfn, _ = transform("omnireel-cycles", "us-east-1")
    resources = cfn["Resources"]

    def refs(node: Any, out: set[str]) -> set[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "Ref" and value in resources:
                    out.add(value)
                elif key == "Fn::GetAtt":
                    out.add(value[0] if isinstance(value, list) else value.split(".")[0])
                elif key == "Fn::Sub":
                    text = value if isinstance(value, str) else value[0]
                    out.update(m for m in re.findall(r"\$\{([A-Za-z0-9]+)[.}]", text) if m in resources)
                    refs(value, out)
                else:
                    refs(value, out)
        elif isinstance(node, list):
            for item in node:
                refs(item, out)
        return out

    graph = {}
    for logical, resource in resources.items():
        depends = resource.get("DependsOn", [])
        graph[logical] = refs(resource.get("Properties", {}), set()) | set(
            [depends] if isinstance(depends, str) else depends
        )
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            assert state.get(nxt) != 1, f"dependency cycle: {' -> '.join([*trail, node, nxt])}"
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for logical in graph:
        if logical not in state:
            visit(logical, [])


# ---------------------------------------------------------------- what Rules cannot compare (issue 27 item 4)
def _comparisons(sam: dict[str, Any]) -> list[dict[str, Any]]:
    return sam["Metadata"]["omnireel"]["ParameterComparisons"]


def test_every_parameter_comparison_names_bounded_parameters_and_holds_for_the_defaults(sam: dict[str, Any]) -> None:
    assert _comparisons(sam), "the heartbeat/timeout comparison is declared"
    for rule in _comparisons(sam):
        (operator,) = set(rule) - {"Why"}
        for name in rule[operator]:
            spec = sam["Parameters"][name]
            assert spec["Type"] == "Number" and "MinValue" in spec and "MaxValue" in spec, name
    assert cfn_rules.comparison_violations(sam, {}) == []
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    for env in ("dev", "prod"):
        items = config[env]["deploy"]["parameters"]["parameter_overrides"]
        assert cfn_rules.comparison_violations(sam, dict(i.split("=", 1) for i in items)) == [], env


@pytest.mark.parametrize(("heartbeat", "timeout"), [("7200", "7200"), ("9000", "7200"), ("600", "300")])
def test_a_heartbeat_not_below_the_callback_timeout_is_refused_naming_both(
    sam: dict[str, Any], heartbeat: str, timeout: str
) -> None:
    params = {"VideoHeartbeatSeconds": heartbeat, "VideoCallbackTimeoutSeconds": timeout}
    (problem,) = cfn_rules.comparison_violations(sam, params)
    assert f"VideoHeartbeatSeconds={heartbeat}" in problem and f"VideoCallbackTimeoutSeconds={timeout}" in problem
    assert (
        cfn_rules.comparison_violations(sam, {**params, "VideoCallbackTimeoutSeconds": str(int(heartbeat) + 1)}) == []
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("VideoHeartbeatSeconds", "0"), ("VideoCallbackTimeoutSeconds", "999999"), ("VideoCallbackTimeoutSeconds", "1")],
)
def test_callback_timing_parameters_are_bounded(sam: dict[str, Any], name: str, value: str) -> None:
    assert any(name in p for p in cfn_rules.constraint_violations(sam, {name: value}))


def test_the_local_stack_refuses_a_heartbeat_not_below_the_timeout_before_creating_anything() -> None:
    from omnireel_local.provision import Provisioner, TemplateRulesFailed

    provisioner = Provisioner("http://127.0.0.1:9", parameter_overrides={"VideoHeartbeatSeconds": "7200"})
    with pytest.raises(
        TemplateRulesFailed, match="VideoHeartbeatSeconds=7200 must be below VideoCallbackTimeoutSeconds"
    ):
        provisioner.run()


def test_omnireel_preflight_refuses_a_heartbeat_not_below_the_timeout(tmp_path: Path) -> None:
    """Through the CLI, as an operator runs it before `sam deploy` (offline: no AWS call)."""
    import subprocess
    import sys

    command = [sys.executable, "-c", "from omnireel_cli.command import main; raise SystemExit(main())"]
    args = ["preflight", "--region", "us-east-1", "--config-env", "prod", "--offline"]
    bad = subprocess.run(
        [*command, *args, "--parameter", "VideoHeartbeatSeconds=7200"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "VideoHeartbeatSeconds=7200 must be below VideoCallbackTimeoutSeconds=7200" in bad.stdout + bad.stderr
    good = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)
    assert "parameter comparisons" in good.stdout and "VideoHeartbeatSeconds=" not in good.stdout
