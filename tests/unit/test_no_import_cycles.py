"""Issue 29 item 4: no import cycles between the modules of each package, derived from the code: every ``import``
counts, at module level, inside a function or under ``TYPE_CHECKING`` (a cycle hidden in a function is still a cycle
a reader has to untangle). The domain package has its own, stricter fence
(tests/unit/architecture/test_boundaries.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "omnireel_cli": ROOT / "cli" / "omnireel_cli",
    "omnireel_client": ROOT / "client" / "omnireel_client",
    "omnireel_local": ROOT / "local" / "omnireel_local",
    "omnireel_relay": ROOT / "relay" / "omnireel_relay",
    "omnireel_template": ROOT / "tooling" / "omnireel_template",
    "omnireel": ROOT / "layers" / "omnireel" / "omnireel",
}


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def _graph(package: str, folder: Path) -> dict[str, set[str]]:
    modules = {_module_name(package, folder, p): p for p in folder.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        base = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                prefix = ".".join(base[: len(base) - (node.level - 1)] if node.level else [])
                module = ".".join(p for p in (prefix, node.module or "") if p) if node.level else node.module or ""
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):  # a package's own __init__
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycles(package: str) -> None:
    graph = _graph(package, PACKAGES[package])
    assert len(graph) >= 2  # the rule read the package
    assert _cycles(graph) == []


def test_the_rule_finds_a_cycle_in_a_function_body(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "a.py").write_text("from .b import x\n")
    (folder / "b.py").write_text("def f():\n    from .a import y\n")
    (folder / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    assert _cycles(_graph("pkg", folder)) == [["pkg.a", "pkg.b"]]
