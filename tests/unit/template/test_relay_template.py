"""The relay's load balancer as deployed (SAM-transformed template): what the internet-facing listener does with a
request path (issue 10, item 3: /metrics must not be public; /healthz stays open)."""

from __future__ import annotations

import fnmatch
from typing import Any

from tests.unit.template.helpers import of_type

PUBLIC_PATHS = ["/", "/index.html", "/healthz", "/v1/audio/speech/stream", "/auth/check"]
BLOCKED_PATHS = ["/metrics", "/metrics/", "/metrics/anything"]


def _path_matches(pattern: str, path: str) -> bool:
    """ALB path-pattern semantics: case-sensitive, ``*`` any run of characters, ``?`` one; the query is not part."""
    return fnmatch.fnmatchcase(path, pattern)


def _action_for(template: dict[str, Any], listener: str, path: str) -> dict[str, Any]:
    rules = [
        r["Properties"]
        for r in of_type(template, "AWS::ElasticLoadBalancingV2::ListenerRule").values()
        if r["Properties"]["ListenerArn"] == {"Ref": listener}
    ]
    for rule in sorted(rules, key=lambda r: int(r["Priority"])):
        conditions = rule["Conditions"]
        assert all(c["Field"] == "path-pattern" for c in conditions), "only path rules are modelled here"
        if all(any(_path_matches(p, path) for p in c["PathPatternConfig"]["Values"]) for c in conditions):
            return rule["Actions"][0]
    return template["Resources"][listener]["Properties"]["DefaultActions"][0]


def test_public_relay_listener_never_forwards_metrics_but_forwards_healthz_and_the_stream(
    cfn: dict[str, Any],
) -> None:
    listeners = {
        name: res
        for name, res in of_type(cfn, "AWS::ElasticLoadBalancingV2::Listener").items()
        if res["Properties"]["LoadBalancerArn"] == {"Ref": "RelayLoadBalancer"}
    }
    assert cfn["Resources"]["RelayLoadBalancer"]["Properties"]["Scheme"] == "internet-facing"
    assert listeners, "the relay load balancer has no listener"
    for name in listeners:  # every listener of the internet-facing ALB, not just today's one
        for path in BLOCKED_PATHS:
            action = _action_for(cfn, name, path)
            assert action["Type"] == "fixed-response", (name, path, action)
            assert action["FixedResponseConfig"]["StatusCode"] == "404"
        for path in PUBLIC_PATHS:
            action = _action_for(cfn, name, path)
            assert action == {"Type": "forward", "TargetGroupArn": {"Ref": "RelayTargetGroup"}}, (name, path)
    assert cfn["Resources"]["RelayTargetGroup"]["Properties"]["HealthCheckPath"] == "/healthz"


# ---------------------------------------------------------------- least privilege and cost (issue 27 item 5)
def _evaluate(node: Any, values: dict[str, Any]) -> Any:
    """Ref, Fn::Sub (both forms), Fn::Split, Fn::Select, Fn::If and Fn::Equals (``values["Conditions"]``: the
    template's): enough for the pull statement's resource."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [_evaluate(n, values) for n in node]
    ((key, arg),) = node.items()
    if key == "Ref":
        return values[arg]
    if key == "Fn::If":
        condition, yes, no = arg
        return _evaluate(yes if _evaluate(values["Conditions"][condition], values) else no, values)
    if key == "Fn::Equals":
        return _evaluate(arg[0], values) == _evaluate(arg[1], values)
    if key == "Fn::Split":
        return _evaluate(arg[1], values).split(_evaluate(arg[0], values))
    if key == "Fn::Select":
        return _evaluate(arg[1], values)[int(arg[0])]
    if key == "Fn::Sub":
        text, variables = (arg, {}) if isinstance(arg, str) else arg
        scope = {**values, **{k: _evaluate(v, values) for k, v in variables.items()}}
        for name, value in scope.items():
            text = text.replace("${" + name + "}", str(value))
        return text
    raise AssertionError(f"not modelled: {key}")


def _pull_resources(sam: dict[str, Any]) -> list[Any]:
    role = sam["Resources"]["RelayExecutionRole"]["Properties"]
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    return [s["Resource"] for s in statements if "ecr:BatchGetImage" in s["Action"]]


def test_the_relay_pulls_only_from_its_own_repository(sam: dict[str, Any]) -> None:
    (resource,) = _pull_resources(sam)
    cases = {
        "111122223333.dkr.ecr.us-east-1.amazonaws.com/omnireel-relay:abc1234": ("aws", "omnireel-relay"),
        "111122223333.dkr.ecr.eu-west-1.amazonaws.com/team/omnireel-relay:v2": ("aws", "team/omnireel-relay"),
        "111122223333.dkr.ecr.us-east-1.amazonaws.com/omnireel-relay@sha256:" + "a" * 64: ("aws", "omnireel-relay"),
        "111122223333.dkr.ecr.cn-north-1.amazonaws.com.cn/relay:1": ("aws-cn", "relay"),
    }
    for uri, (partition, repository) in cases.items():
        region = uri.split(".")[3]
        suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
        values = {
            "RelayImageUri": uri, "AWS::Partition": partition, "AWS::Region": region, "AWS::AccountId": "111122223333",
            "AWS::URLSuffix": suffix, "Conditions": sam["Conditions"],
        }  # fmt: skip
        arn = _evaluate(resource, values)
        assert arn == f"arn:{partition}:ecr:{region}:111122223333:repository/{repository}", uri
        assert "*" not in arn


def test_the_load_balancer_reaches_only_the_relay_tasks(sam: dict[str, Any]) -> None:
    resources = sam["Resources"]
    inline = resources["RelayLoadBalancerSecurityGroup"]["Properties"]["SecurityGroupEgress"]
    # Declared, so EC2's default allow-all egress is replaced; loopback only, so it opens nothing.
    assert [rule["CidrIp"] for rule in inline] == ["127.0.0.1/32"]
    separate = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SecurityGroupEgress"
        and r["Properties"]["GroupId"] == {"Ref": "RelayLoadBalancerSecurityGroup"}
    ]
    assert separate == [
        {
            "GroupId": {"Ref": "RelayLoadBalancerSecurityGroup"},
            "IpProtocol": "tcp",
            "FromPort": 8080,
            "ToPort": 8080,
            "DestinationSecurityGroupId": {"Ref": "RelayTaskSecurityGroup"},
            "Description": "to the relay tasks only",
        }
    ]
    # Rule, not list: no egress anywhere in the template to the whole internet except the tasks' own 443/8443
    # (SageMaker, ECR and logs have no VPC endpoints in this stack).
    wide = [
        (logical, rule.get("FromPort"))
        for logical, r in resources.items()
        if r["Type"] == "AWS::EC2::SecurityGroup"
        for rule in r["Properties"].get("SecurityGroupEgress", [])
        if rule.get("CidrIp") == "0.0.0.0/0"
    ]
    assert sorted(wide) == [("RelayTaskSecurityGroup", 443), ("RelayTaskSecurityGroup", 8443)]


def test_container_insights_is_a_parameter_off_in_dev(sam: dict[str, Any]) -> None:
    import tomllib

    from omnireel_template import ROOT

    settings = sam["Resources"]["RelayCluster"]["Properties"]["ClusterSettings"]
    assert settings == [{"Name": "containerInsights", "Value": {"Ref": "RelayContainerInsights"}}]
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())

    def value(env: str) -> str:
        items = dict(i.split("=", 1) for i in config[env]["deploy"]["parameters"]["parameter_overrides"])
        return items.get("RelayContainerInsights", sam["Parameters"]["RelayContainerInsights"]["Default"])

    assert (value("dev"), value("prod")) == ("disabled", "enabled")


def test_every_split_delimiter_is_a_literal_string(sam: dict[str, Any]) -> None:
    """CloudFormation: "For the Fn::Split delimiter, you can't use any functions" (a rule over the whole template)."""

    def splits(node: Any) -> list[Any]:
        if isinstance(node, dict):
            found = [node["Fn::Split"][0]] if "Fn::Split" in node else []
            return found + [d for value in node.values() for d in splits(value)]
        if isinstance(node, list):
            return [d for item in node for d in splits(item)]
        return []

    delimiters = splits(sam)
    assert delimiters and all(isinstance(d, str) for d in delimiters), [d for d in delimiters if not isinstance(d, str)]
