"""The layering fence (see the ``omnireel`` package docstring and docs/development.md).

Imports are read from the source (every ``import`` statement, including ones inside functions), so a lazy import
cannot slip past the fence.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "layers" / "omnireel" / "omnireel"

# Models and rules: no AWS, no I/O. A module added here promises to import none of FORBIDDEN_IN_MODELS.
MODELS_AND_RULES = {
    "batch",
    "batch_events",
    "bounded",
    "caller",
    "errors",
    "events",
    "image_request",
    "job",
    "media",
    "mp4",
    "notification",
    "records",
    "reference_image",
    "request",
    "s3uri",
    "video_request",
}
# Use cases and Lambda glue: every other top-level module (models and rules import none of them).

PRODUCT_ROOTS = [ROOT / "functions", ROOT / "layers", ROOT / "relay"]
TOOLING_PACKAGES = ("omnireel_local", "omnireel_cli")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (``from x import y`` gives x and x.y: y may be a submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def top_modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def forbidden_for_models(names: set[str]) -> set[str]:
    """What a models-and-rules module must not import: AWS (SDK or adapters) and the layers above it."""
    above = set(top_modules()) - MODELS_AND_RULES
    bad = {n for n in names if any(_is_under(n, p) for p in ("boto3", "botocore", "omnireel.aws"))}
    bad |= {n for n in names if n.startswith("omnireel.") and n.split(".")[1] in above}
    return bad


def test_every_models_and_rules_module_exists() -> None:
    assert set(top_modules()) >= MODELS_AND_RULES, MODELS_AND_RULES - set(top_modules())


@pytest.mark.parametrize("module", sorted(MODELS_AND_RULES))
def test_models_and_rules_import_no_aws_and_no_use_case(module: str) -> None:
    assert forbidden_for_models(imported_modules(PACKAGE / f"{module}.py")) == set()


def test_only_the_adapters_import_boto3_or_botocore() -> None:
    """The inbox once caught a botocore ClientError around tagging; that belongs in ``omnireel.aws``."""
    offenders = {}
    for path in [*PACKAGE.glob("*.py"), *(ROOT / "functions").glob("*/*.py")]:
        sdk = {n for n in imported_modules(path) if _is_under(n, "boto3") or _is_under(n, "botocore")}
        if sdk:
            offenders[str(path.relative_to(ROOT))] = sorted(sdk)
    assert offenders == {}


def test_product_code_never_imports_the_local_stack_or_the_cli() -> None:
    offenders = {}
    for root in PRODUCT_ROOTS:
        for path in root.rglob("*.py"):
            tooling = {n for n in imported_modules(path) if any(_is_under(n, p) for p in TOOLING_PACKAGES)}
            if tooling:
                offenders[str(path.relative_to(ROOT))] = sorted(tooling)
    assert offenders == {}


def test_the_fence_catches_a_leak(tmp_path: Path) -> None:
    """The checks above can fail: a model importing botocore, an adapter or a use case is caught."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "from botocore.exceptions import ClientError\n"
        "def f():\n    from omnireel.aws.job_store import JobStore\n    import omnireel.outcome\n"
    )
    assert forbidden_for_models(imported_modules(leaky)) == {
        "botocore.exceptions",
        "botocore.exceptions.ClientError",
        "omnireel.aws.job_store",
        "omnireel.aws.job_store.JobStore",
        "omnireel.outcome",
    }


def test_api_routes_read_as_the_happy_path() -> None:
    """Issue 15 item 7: an API route raises a domain error and the resolver's exception handlers map it to a status;
    no route builds an error response itself (``_error`` is called from the exception handlers only)."""
    tree = ast.parse((ROOT / "functions" / "api" / "handler.py").read_text())
    offenders = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        decorators = [ast.unparse(d) for d in node.decorator_list]
        if not any(d.startswith(("app.get", "app.post", "app.put", "app.delete", "app.patch")) for d in decorators):
            continue
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == "_error"]
        offenders += [f"{node.name} (line {call.lineno})" for call in calls]
    assert not offenders, f"routes that return an error response instead of raising a domain error: {offenders}"
