"""template.yaml as data: the single source of truth for cloud and local provisioning.

Loads the SAM template with CloudFormation intrinsics, resolves parameter defaults, and renders a
state machine's ASL by applying its ``DefinitionSubstitutions`` (as CloudFormation would).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    return yaml_parse(path.read_text())


def parameter_defaults(template: dict[str, Any], overrides: dict[str, str] | None = None) -> dict[str, str]:
    values = {name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()}
    values.update(overrides or {})
    return values


def render_definition(definition: str, substitutions: dict[str, str]) -> dict[str, Any]:
    """Apply ``${Name}`` substitutions to an ASL document and parse it; unknown names are an error."""

    def replace(match: re.Match[str]) -> str:
        name = match[1]
        if name not in substitutions:
            raise KeyError(f"no substitution for ${{{name}}} in the state machine definition")
        return str(substitutions[name])

    return json.loads(_PLACEHOLDER.sub(replace, definition))


def state_machine_substitutions(
    template: dict[str, Any], resource: str, resolve: Any, parameters: dict[str, str]
) -> dict[str, str]:
    """Resolve the DefinitionSubstitutions of ``resource``: ``!Ref Param`` from ``parameters``, anything
    else (``!GetAtt Fn.Arn``, ``!Ref Resource``) through ``resolve(value)``."""
    props = template["Resources"][resource]["Properties"]
    resolved: dict[str, str] = {}
    for name, value in props.get("DefinitionSubstitutions", {}).items():
        if isinstance(value, dict) and "Ref" in value and value["Ref"] in parameters:
            resolved[name] = parameters[value["Ref"]]
        elif isinstance(value, dict):
            resolved[name] = resolve(value)
        else:
            resolved[name] = str(value)
    return resolved


def definition_file(template: dict[str, Any], resource: str) -> Path:
    return ROOT / template["Resources"][resource]["Properties"]["DefinitionUri"]


def render_for_lint(resource: str = "PipelineStateMachine") -> dict[str, Any]:
    """The definition with parameter defaults and placeholder ARNs (for static validation)."""
    template = load_template()

    def placeholder(value: dict[str, Any]) -> str:
        target = value.get("Fn::GetAtt", [value.get("Ref", "Resource")])[0]
        return f"arn:aws:lambda:us-east-1:123456789012:function:{target}"

    subs = state_machine_substitutions(template, resource, placeholder, parameter_defaults(template))
    return render_definition(definition_file(template, resource).read_text(), subs)


if __name__ == "__main__":
    import sys

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".aws-sam/asl")
    out.mkdir(parents=True, exist_ok=True)
    target = out / "pipeline.asl.json"
    target.write_text(json.dumps(render_for_lint(), indent=2))
    print(target)
