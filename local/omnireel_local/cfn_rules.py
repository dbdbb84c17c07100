"""The template's ``Rules`` section, evaluated as CloudFormation does before it creates or updates any resource.

CloudFormation checks every rule whose ``RuleCondition`` holds (or that has none) against the stack's parameter
values and refuses the whole operation with the failing assertions' ``AssertDescription``. The local stack runs the
same check before provisioning (so it refuses what CloudFormation refuses), and ``omnireel preflight`` runs it before
``sam deploy`` (so a mistake costs seconds, not a rollback).

Rule functions implemented (the ones CloudFormation allows in Rules): ``Fn::And``, ``Fn::Or``, ``Fn::Not``,
``Fn::Equals``, ``Fn::Contains``, ``Fn::EachMemberEquals``, ``Fn::EachMemberIn``, and ``Ref`` to a parameter or a
pseudo parameter. ``Fn::RefAll`` / ``Fn::ValueOf`` / ``Fn::ValueOfAll`` look AWS-specific parameter types up in the
account; this template has none, so they are refused here rather than guessed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any


class RuleError(ValueError):
    """A rule uses something this evaluator (or CloudFormation's Rules section) does not support."""


def parameter_values(template: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parameter values as Rules see them: defaults, then overrides; a CommaDelimitedList is a list of strings
    (CloudFormation splits on commas and keeps empty entries, so an empty value is ``[""]``)."""
    values: dict[str, Any] = {}
    for name, spec in (template.get("Parameters") or {}).items():
        raw = (overrides or {}).get(name, spec.get("Default", ""))
        if isinstance(raw, list):
            raw = ",".join(str(x) for x in raw)
        text = str(raw).lower() if isinstance(raw, bool) else str(raw)
        values[name] = text.split(",") if spec.get("Type") == "CommaDelimitedList" else text
    return values


def unknown_parameters(template: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> list[str]:
    """Values for parameters the template does not declare. CloudFormation refuses the whole operation before
    anything else (ValidationError ``Parameters: [NoSuchParameter] do not exist in the template``): a misspelt name
    would otherwise leave its parameter at the default without a word. Its message, and the closest declared name."""
    declared = list(template.get("Parameters") or {})
    unknown = sorted(set(overrides or {}) - set(declared))
    if not unknown:
        return []
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6) or difflib.get_close_matches(
            name.lower(), [d.lower() for d in declared], n=1, cutoff=0.6
        )
        if close:
            real = next(d for d in declared if d.lower() == close[0].lower())
            hints.append(f"{name}: did you mean {real}?")
    return [
        f"Parameters: [{', '.join(unknown)}] do not exist in the template" + (f" ({'; '.join(hints)})" if hints else "")
    ]


def constraint_violations(template: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> list[str]:
    """Parameter constraints CloudFormation checks first: AllowedValues, AllowedPattern (the whole value must match),
    MinValue/MaxValue and a numeric value for Number, MinLength/MaxLength; a CommaDelimitedList's entries each."""
    problems: list[str] = []
    values = parameter_values(template, overrides)
    for name, spec in (template.get("Parameters") or {}).items():
        items = values[name] if isinstance(values[name], list) else [values[name]]
        what = spec.get("ConstraintDescription")
        for item in items:
            reason = ""
            if "AllowedValues" in spec and item not in [str(v).lower() if isinstance(v, bool) else str(v)
                                                         for v in spec["AllowedValues"]]:  # fmt: skip
                reason = f"must be one of {spec['AllowedValues']}"
            elif "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], item):
                reason = f"must match {spec['AllowedPattern']}"
            elif spec.get("Type") == "Number":
                try:
                    number = float(item)
                except ValueError:
                    reason = "must be a number"
                else:
                    if "MinValue" in spec and number < float(spec["MinValue"]):
                        reason = f"must be >= {spec['MinValue']}"
                    elif "MaxValue" in spec and number > float(spec["MaxValue"]):
                        reason = f"must be <= {spec['MaxValue']}"
            elif "MaxLength" in spec and len(item) > int(spec["MaxLength"]):
                reason = f"must be at most {spec['MaxLength']} characters"
            elif "MinLength" in spec and len(item) < int(spec["MinLength"]):
                reason = f"must be at least {spec['MinLength']} characters"
            if reason:
                problems.append(f"Parameter {name}={item!r} {reason}" + (f" ({what})" if what else ""))
    return problems


def comparison_violations(template: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> list[str]:
    """The template's ``Metadata.omnireel.ParameterComparisons``: what Rules cannot express (no Rules function compares
    two numbers), e.g. ``{Less: [A, B], Why: ...}`` = parameter A must be below parameter B. The message names both
    parameters and their values."""
    values = parameter_values(template, overrides)
    problems = []
    for rule in ((template.get("Metadata") or {}).get("omnireel") or {}).get("ParameterComparisons") or []:
        (operator, (left, right)), *_ = ((k, v) for k, v in rule.items() if k in _COMPARISONS)
        try:
            ok = _COMPARISONS[operator](float(values[left]), float(values[right]))
        except ValueError:
            continue  # not numbers: constraint_violations reports that
        if not ok:
            words = {"Less": "below", "LessOrEqual": "at most"}[operator]
            why = " ".join(str(rule.get("Why", "")).split())
            problems.append(f"Parameter {left}={values[left]} must be {words} {right}={values[right]}: {why}")
    return problems


_COMPARISONS = {"Less": lambda a, b: a < b, "LessOrEqual": lambda a, b: a <= b}


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list):
        raise RuleError(f"{what} needs a list of strings, got {value!r}")
    return [str(v) for v in value]


class _Evaluator:
    def __init__(self, values: Mapping[str, Any]):
        self.values = values

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if not isinstance(node, dict):
            return str(node).lower() if isinstance(node, bool) else str(node)
        if len(node) != 1:
            raise RuleError(f"not a rule function: {node!r}")
        ((key, arg),) = node.items()
        if key == "Ref":
            if arg not in self.values:
                raise RuleError(f"Ref to an unknown parameter {arg!r}")
            return self.values[arg]
        return self.truth(node)

    def truth(self, node: Any) -> bool:
        if not isinstance(node, dict) or len(node) != 1:
            raise RuleError(f"not a rule function: {node!r}")
        ((key, arg),) = node.items()
        if key == "Fn::And":
            return all(self.truth(x) for x in arg)
        if key == "Fn::Or":
            return any(self.truth(x) for x in arg)
        if key == "Fn::Not":
            return not self.truth(arg[0])
        if key == "Fn::Equals":
            a, b = (self.value(x) for x in arg)
            return a == b
        if key == "Fn::Contains":
            items, text = self.value(arg[0]), self.value(arg[1])
            return str(text) in _strings(items, "Fn::Contains")
        if key == "Fn::EachMemberEquals":
            items, text = self.value(arg[0]), self.value(arg[1])
            return all(item == str(text) for item in _strings(items, "Fn::EachMemberEquals"))
        if key == "Fn::EachMemberIn":
            items, allowed = self.value(arg[0]), self.value(arg[1])
            allowed_set = set(_strings(allowed, "Fn::EachMemberIn"))
            return all(item in allowed_set for item in _strings(items, "Fn::EachMemberIn"))
        raise RuleError(f"{key} is not supported in Rules here (see omnireel_local.cfn_rules)")


def failed_assertions(
    template: Mapping[str, Any],
    overrides: Mapping[str, str] | None = None,
    *,
    stack_name: str = "omnireel",
    region: str = "us-east-1",
    account_id: str = "123456789012",
) -> list[str]:
    """``"<rule>: <AssertDescription>"`` for every assertion that fails with these parameter values ([] = the stack
    may be created). Pseudo parameters (``AWS::Region`` etc.) take the given values."""
    values = parameter_values(template, overrides)
    values.update(
        {
            "AWS::Region": region,
            "AWS::StackName": stack_name,
            "AWS::AccountId": account_id,
            "AWS::Partition": "aws-cn" if region.startswith("cn-") else "aws",
            "AWS::URLSuffix": "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com",
        }
    )
    evaluator = _Evaluator(values)
    failures: list[str] = []
    for name, rule in (template.get("Rules") or {}).items():
        condition = rule.get("RuleCondition")
        if condition is not None and not evaluator.truth(condition):
            continue
        for assertion in rule.get("Assertions") or []:
            if not evaluator.truth(assertion["Assert"]):
                failures.append(f"{name}: {assertion.get('AssertDescription', 'assertion failed')}")
    return failures
