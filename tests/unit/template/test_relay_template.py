"""The relay's load balancer as deployed (SAM-transformed template): what the internet-facing listener does with a
request path (issue 10, item 3: /metrics must not be public; /healthz stays open)."""

from __future__ import annotations

import fnmatch
from typing import Any

from tests.unit.template.test_template import cfn, of_type, sam  # noqa: F401 - module fixtures

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
    cfn: dict[str, Any],  # noqa: F811
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
