"""The layering fence (see the ``omnireel`` package docstring and docs/development.md).

Imports are read from the source (every ``import`` statement, including ones inside functions), so a lazy import
cannot slip past the fence.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "layers" / "omnireel" / "omnireel"

LAYERS = ("models and rules", "adapters", "use cases", "Lambda runtime")
# What each layer may import inside the package (besides itself, except where noted).
MAY_IMPORT = {
    "models and rules": {"models and rules"},
    "adapters": {"models and rules", "adapters", "runtime.observability"},
    "use cases": {"models and rules", "adapters", "use cases", "runtime.observability"},
    "Lambda runtime": {"models and rules", "Lambda runtime"},
}

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


def package_modules() -> dict[str, Path]:
    """Every module of the package, by its name under ``omnireel`` (``jobs.steps``), walked from the filesystem."""
    return {
        ".".join(path.relative_to(PACKAGE).with_suffix("").parts): path
        for path in PACKAGE.rglob("*.py")
        if path.stem != "__init__"
    }


def documented_layers() -> dict[str, list[str]]:
    """The layer map as the package docstring writes it: each ``- **layer**`` bullet and the modules it names
    (double-backquoted dotted names that are modules; ``every module of ``aws```` names the whole folder)."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or ""
    modules = package_modules()
    found: dict[str, list[str]] = {}
    for bullet in re.split(r"\n(?=- \*\*)", doc):
        match = re.match(r"- \*\*(.+?)\*\*", bullet)
        if not match or match.group(1) not in LAYERS:
            continue
        layer = match.group(1)
        text = bullet.split(":", 1)[1] if "->" in bullet.split(":", 1)[0] else bullet
        # the arrows name what a layer may import (``runtime.observability``), not its members: cut them out
        text = re.sub(r"->[^)]*\)", ")", text)
        named = [m for m in re.findall(r"``([a-z0-9_.]+)``", text) if m in modules]
        for folder in re.findall(r"every module of ``([a-z_]+)``", text):
            named += [m for m in modules if m.startswith(folder + ".")]
        found[layer] = named
    return found


def layer_of() -> dict[str, str]:
    return {module: layer for layer, modules in documented_layers().items() for module in modules}


def _is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def fence_violations(module: str, names: set[str], layers: dict[str, str]) -> set[str]:
    """The package modules ``module`` imports that its layer may not import."""
    allowed = MAY_IMPORT[layers[module]]
    bad = set()
    for name in names:
        if not name.startswith("omnireel."):
            continue
        target = name.removeprefix("omnireel.")
        while target and target not in layers:  # ``from omnireel.jobs.job import Job`` -> jobs.job
            target = target.rpartition(".")[0]
        if not target:
            continue  # a package (``omnireel.aws``) or the package root
        if layers[target] not in allowed and target not in allowed:
            bad.add(name)
    if layers[module] == "models and rules":
        bad |= {n for n in names if any(_is_under(n, p) for p in ("boto3", "botocore"))}
    return bad


def test_the_layer_map_names_every_module_exactly_once() -> None:
    """A module added to the package without a place in the documented map fails here."""
    documented = [m for modules in documented_layers().values() for m in modules]
    assert set(documented_layers()) == set(LAYERS)
    twice = {m for m in documented if documented.count(m) > 1}
    assert not twice, f"modules named in more than one layer: {sorted(twice)}"
    missing = set(package_modules()) - set(documented)
    assert not missing, f"modules in no layer of the package docstring's map: {sorted(missing)}"


@pytest.mark.parametrize("module", sorted(package_modules()))
def test_every_module_imports_only_what_its_layer_may(module: str) -> None:
    layers = layer_of()
    assert module in layers, f"{module} is in no layer of the map"
    assert fence_violations(module, imported_modules(package_modules()[module]), layers) == set()


def test_only_the_adapters_import_boto3_or_botocore() -> None:
    """The inbox once caught a botocore ClientError around tagging; that belongs in ``omnireel.aws``."""
    offenders = {}
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "functions").glob("*/*.py")]:
        if path.is_relative_to(PACKAGE / "aws"):
            continue
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
    """The checks above can fail: a model importing botocore, an adapter or a use case is caught, and so is a use
    case importing the Lambda runtime's settings."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "from botocore.exceptions import ClientError\n"
        "def f():\n    from omnireel.aws.job_store import JobStore\n    import omnireel.jobs.outcome\n"
        "from omnireel.core.errors import OmnireelError\n"
    )
    layers = layer_of()
    assert fence_violations("jobs.job", imported_modules(leaky), layers) == {
        "botocore.exceptions",
        "botocore.exceptions.ClientError",
        "omnireel.aws.job_store",
        "omnireel.aws.job_store.JobStore",
        "omnireel.jobs.outcome",
    }
    assert fence_violations("jobs.steps", {"omnireel.runtime.settings", "omnireel.runtime.observability"}, layers) == {
        "omnireel.runtime.settings"
    }


def test_the_map_reader_sees_an_unplaced_module() -> None:
    """Every module the filesystem holds is in the map: the walk finds modules in sub-packages too."""
    assert {"jobs.steps", "aws.job_store", "webhooks.dispatch", "runtime.settings"} <= set(package_modules())
    assert "aws.job_store" in layer_of() and layer_of()["aws.job_store"] == "adapters"


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


# ---------------------------------------------------------------------------------------------- handlers (issue 26)
HANDLERS = sorted((ROOT / "functions").glob("*/handler.py"))
POWERTOOLS_STACK = ("logger.inject_lambda_context", "tracer.capture_lambda_handler", "metrics.log_metrics")


def _handler_function(tree: ast.Module) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "handler")


def adapter_classes() -> set[str]:
    """The adapters ``omnireel.aws.adapters`` builds (its factories' return types): handlers call the factories."""
    tree = ast.parse((PACKAGE / "aws" / "adapters.py").read_text())
    return {
        ast.unparse(node.returns).split(" | ")[0]
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.returns is not None
    }


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.parent.name)
def test_every_handler_uses_the_one_decorator_stack_and_the_adapter_factory(path: Path) -> None:
    """Every function's handler (found on disk) is decorated with ``lambda_handler`` and nothing else of the stack,
    and builds the adapters the factory knows through the factory, not with their constructors."""
    tree = ast.parse(path.read_text())
    decorators = [ast.unparse(d) for d in _handler_function(tree).decorator_list]
    assert len(decorators) == 1 and decorators[0].startswith("lambda_handler("), decorators
    assert not any(d.startswith(POWERTOOLS_STACK) for n in ast.walk(tree) for d in _decorators(n)), path
    built = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert built & adapter_classes() == set(), f"{path}: build these with omnireel.aws.adapters"


def _decorators(node: ast.AST) -> list[str]:
    return [ast.unparse(d) for d in getattr(node, "decorator_list", [])]


def test_the_adapter_rule_sees_the_adapters() -> None:
    assert {"JobStore", "ArtifactStore", "EventPublisher", "Workflow"} <= adapter_classes()


def _errors_raised_behind(entry: Path) -> dict[str, set[str]]:
    """Every ``raise SomeError(...)`` in ``entry`` and in the package modules it reaches through its imports
    (transitively: an over-approximation of what its routes can raise), by error class name. The adapter factories
    (``omnireel.aws.adapters``, which import every adapter) are followed into the factories ``entry`` calls only."""
    factories = PACKAGE / "aws" / "adapters.py"
    called = {
        node.func.attr
        for node in ast.walk(ast.parse(entry.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and ast.unparse(node.func.value) == "adapters"
    }
    seen: set[Path] = set()
    todo = [entry]
    raised: dict[str, set[str]] = {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text())
        imported = imported_modules(path)
        if path == factories:
            built = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in called]
            imported = {f"{n.module}.{a.name}" for f in built for n in ast.walk(f) if isinstance(n, ast.ImportFrom)
                        for a in n.names if n.module}  # fmt: skip
        for name in imported:
            target = PACKAGE.parent / (name.replace(".", "/") + ".py")
            if name.startswith("omnireel.") and target.is_file():
                todo.append(target)
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                raised.setdefault(ast.unparse(node.exc.func).rsplit(".", 1)[-1], set()).add(path.name)
    return raised


def test_the_api_error_table_gives_every_error_a_route_can_raise_its_own_status() -> None:
    """``ERROR_STATUS`` in the API handler lists every domain error its routes can raise (or an ancestor other than
    the catch-all ``OmnireelError``): a new error raised behind a route gets a deliberate status, not the fallback."""
    from omnireel.core import errors

    api = ROOT / "functions" / "api" / "handler.py"
    table = next(
        node.value
        for node in ast.parse(api.read_text()).body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "ERROR_STATUS"
    )
    assert isinstance(table, ast.Dict)
    listed = {getattr(errors, ast.unparse(key)) for key in table.keys if key is not None}
    domain = {
        name: cls
        for name in _errors_raised_behind(api)
        if isinstance(cls := getattr(errors, name, None), type) and issubclass(cls, errors.OmnireelError)
    }
    assert {"InvalidRequest", "JobNotFound", "JobFinished"} <= set(domain)  # the walk reaches the use cases
    unlisted = {
        n for n, cls in domain.items() if not any(c in listed for c in cls.__mro__ if c is not errors.OmnireelError)
    }
    assert not unlisted, f"domain errors a route can raise with no status in ERROR_STATUS: {sorted(unlisted)}"
