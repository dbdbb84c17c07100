"""template.yaml as data: the single source of truth for cloud and local provisioning.

Loads the SAM template with CloudFormation intrinsics, resolves parameter defaults, renders a state machine's ASL by
applying its ``DefinitionSubstitutions`` (as CloudFormation would), runs the SAM transform, and lists the functions.
Tooling only (the lint gate, the template tests, the local stack, the harness, the benches): it depends on
aws-sam-translator, never on the local stack, and product code never imports it.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from samtranslator.yaml_helper import intrinsics_multi_constructor

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
FUNCTIONS_DIR = ROOT / "functions"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


class _TemplateLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """samtranslator's ``yaml_parse`` (SafeLoader + the CloudFormation intrinsics constructor), on libyaml when
    PyYAML has it: the same data, parsed ~13x faster (0.03 s instead of 0.4 s for template.yaml), which the local
    stack's start, the harness and the template tests pay on every load."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A key given twice in one mapping is refused, as cfn-lint refuses it (E0000 "Duplicate found") and
        CloudFormation's YAML parser does: PyYAML keeps the last one silently, so a pasted route or resource twice
        passed every local check and failed only at ``sam validate --lint`` or at deploy."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


_TemplateLoader.add_multi_constructor("!", intrinsics_multi_constructor)
_parsed: dict[tuple[Path, int, int], dict[str, Any]] = {}


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as data (a fresh copy each call: callers may change it); re-read when the file changes."""
    stat = path.stat()
    key = (path.resolve(), stat.st_mtime_ns, stat.st_size)
    if key not in _parsed:
        _parsed.clear()
        _parsed[key] = yaml.load(path.read_text(), Loader=_TemplateLoader)  # noqa: S506 - a safe loader
    return copy.deepcopy(_parsed[key])


RETAIN_DATA_POLICY = {"Fn::If": ["RetainDataOnDelete", "Retain", "Delete"]}


def retained_by_retain_data(template: dict[str, Any] | None = None) -> set[str]:
    """The logical ids whose DeletionPolicy follows the RetainData parameter (``!If [RetainDataOnDelete, Retain,
    Delete]``): what RetainData=true keeps. Conditional resources have static policies and are not among them."""
    template = template if template is not None else load_template()
    return {
        logical
        for logical, resource in template["Resources"].items()
        if resource.get("DeletionPolicy") == RETAIN_DATA_POLICY
    }


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


def function_folders() -> list[str]:
    """The Lambda functions, as the folders under ``functions/`` that hold a ``handler.py`` (sorted)."""
    return sorted(p.name for p in FUNCTIONS_DIR.iterdir() if (p / "handler.py").is_file())


def serverless_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``AWS::Serverless::Function`` resources by logical id."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}


def function_folder(resource: dict[str, Any]) -> str:
    """The ``functions/<folder>`` a function's ``CodeUri`` names."""
    return Path(resource["Properties"]["CodeUri"]).name


def sam_transform(template: dict[str, Any], stack_name: str, region: str = "us-east-1") -> dict[str, Any]:
    """The CloudFormation template CloudFormation would create from ``template`` (aws-sam-translator, no managed
    policy look-ups). Local code paths must already be replaced by S3 locations."""
    from samtranslator.translator.transform import transform

    class _NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    previous = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = region  # the translator reads the region for pseudo parameters
    try:
        return transform(copy.deepcopy(template), {"AWS::StackName": stack_name}, _NoManagedPolicies())
    finally:
        if previous is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
        else:
            os.environ["AWS_DEFAULT_REGION"] = previous


def placeholder_code(template: dict[str, Any], bucket: str) -> tuple[dict[str, Any], dict[str, Path]]:
    """A copy of ``template`` whose local code (``CodeUri``, ``ContentUri``, ``DefinitionUri``) points at
    ``s3://bucket/<LogicalId>.zip`` (``.asl`` for definitions), and the local folder or file behind each key."""
    sam = copy.deepcopy(template)
    folders: dict[str, Path] = {}
    for logical, resource in sam.get("Resources", {}).items():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                folders[f"{logical}.zip"] = (ROOT / props[key]).resolve()
                props[key] = f"s3://{bucket}/{logical}.zip"
        if isinstance(props.get("DefinitionUri"), str):
            folders[f"{logical}.asl"] = (ROOT / props["DefinitionUri"]).resolve()
            props["DefinitionUri"] = {"Bucket": bucket, "Key": f"{logical}.asl"}
    return sam, folders


def function_environment(
    template: dict[str, Any], logical: str, parameters: dict[str, str] | None = None
) -> dict[str, str]:
    """A function's environment as CloudFormation would set it (``Globals`` then the function's own variables), with
    ``!Ref Parameter`` resolved from ``parameters`` (default: the parameter defaults) and any other intrinsic replaced
    by a placeholder naming what it refers to: enough to validate a settings model, not to call AWS."""
    params = parameter_defaults(template) if parameters is None else parameters
    variables = {
        **template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}),
        **template["Resources"][logical]["Properties"].get("Environment", {}).get("Variables", {}),
    }
    resolved: dict[str, str] = {}
    for name, value in variables.items():
        if isinstance(value, dict) and isinstance(value.get("Ref"), str) and value["Ref"] in params:
            resolved[name] = params[value["Ref"]]
        elif isinstance(value, dict):
            target = value.get("Ref") or value.get("Fn::GetAtt") or value
            resolved[name] = "placeholder-" + re.sub(r"[^A-Za-z0-9]+", "-", json.dumps(target)).strip("-")
        else:
            resolved[name] = str(value)
    return resolved


# What a Lambda-like interpreter on this machine gets besides the template's variables: the region and a dummy key,
# and every AWS endpoint (and the X-Ray daemon) on a closed loopback port, so a handler imported for a test or a
# bench creates its clients but nothing can reach a network.
OFFLINE_AWS = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:9",
    "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def offline_lambda_environment(folder: str, parameters: dict[str, str] | None = None) -> dict[str, str]:
    """The environment ``functions/<folder>``'s handler sees on Lambda, for importing it here: PATH and HOME, the
    template's variables for it (``parameters`` over the defaults), what Lambda sets (``LAMBDA_TASK_ROOT``,
    ``AWS_LAMBDA_FUNCTION_NAME``) and ``OFFLINE_AWS``. The caller adds its own PYTHONPATH."""
    template = load_template()
    logical = next(k for k, fn in serverless_functions(template).items() if function_folder(fn) == folder)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        **function_environment(template, logical, parameter_defaults(template, parameters)),
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / folder),
        "AWS_LAMBDA_FUNCTION_NAME": f"omnireel-{folder}",
        **OFFLINE_AWS,
    }
