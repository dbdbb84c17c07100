"""Issue 34 items 5 and 8: every function that writes a job record or ends a job may update the usage table (the +1,
the -1 and the day's sums are items of those same transactions), and no other function may touch it. The set is
derived from the code: the handlers whose calls (through the omnireel package's call graph) reach the use cases that
create or end jobs. Without the grant the transaction is refused and the job could not be accepted or could not end."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from omnireel_template import ROOT, load_template

PACKAGE = ROOT / "layers" / "omnireel"
# The use cases that write a job record or end one: a function whose handler calls into one of them (through any chain
# of calls in the omnireel package) writes the +1 or the -1 and the day's sums.
SINKS = {"omnireel.jobs.submission:submit_job", "omnireel.jobs.outcome:finish_job",
         "omnireel.jobs.cancellation:cancel_job"}  # fmt: skip


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in (PACKAGE / "omnireel").rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text())
    return found


def _calls(node: ast.AST) -> tuple[set[str], set[str]]:
    """(names called, attribute names called) inside ``node``."""
    names, attributes = set(), set()
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Name):
            names.add(call.func.id)
        elif isinstance(call.func, ast.Attribute):
            attributes.add(call.func.attr)
    return names, attributes


def _imported(tree: ast.Module) -> dict[str, str]:
    return {a.asname or a.name: f"{n.module}:{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module and n.module.startswith("omnireel") for a in n.names}  # fmt: skip


class CallGraph:
    """Calls between the package's functions and methods, by name: a name through the module's imports, an attribute
    call to every method of that name (an over-approximation: it can only add callers, never miss one)."""

    def __init__(self) -> None:
        self.edges: dict[str, set[str]] = {}
        self.methods: dict[str, set[str]] = {}
        for module, tree in _modules().items():
            imported = _imported(tree)
            for top in tree.body:
                defs = [(top.name, top)] if isinstance(top, ast.FunctionDef) else []
                if isinstance(top, ast.ClassDef):
                    defs = [(f"{top.name}.{f.name}", f) for f in top.body if isinstance(f, ast.FunctionDef)]
                for name, node in defs:
                    key = f"{module}:{name}"
                    self.methods.setdefault(name.rsplit(".", 1)[-1], set()).add(key) if "." in name else None
                    self.edges[key] = self._resolve(_calls(node), module, imported)

    def _resolve(self, calls: tuple[set[str], set[str]], module: str, imported: dict[str, str]) -> set[str]:
        names, attributes = calls
        found = {imported.get(n, f"{module}:{n}") for n in names}
        return found | {f"@{a}" for a in attributes}

    def reaches(self, start: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(start)
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            targets = self.methods.get(node[1:], set()) if node.startswith("@") else self.edges.get(node, set())
            todo += targets
        return seen


def _handler_calls(handler: Path, graph: CallGraph) -> set[str]:
    tree = ast.parse(handler.read_text())
    return graph._resolve(_calls(tree), "handler", _imported(tree))


def _usage_actions(resource: dict[str, Any]) -> set[str]:
    actions: set[str] = set()
    for policy in resource["Properties"].get("Policies") or []:
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if any("UsageTable" in str(r) for r in resources):
                listed = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                actions.update(listed)
    return actions


def test_every_function_that_writes_or_ends_jobs_may_count_them_and_no_other() -> None:
    functions = {
        name: resource
        for name, resource in load_template()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function" and "CodeUri" in resource["Properties"]
    }
    graph, writers = CallGraph(), set()
    for name, resource in functions.items():
        handler = ROOT / str(resource["Properties"]["CodeUri"]) / "handler.py"
        if handler.exists() and graph.reaches(_handler_calls(handler, graph)) & SINKS:
            writers.add(name)
    assert {"ApiFunction", "InboxFunction", "AsyncResultFunction", "FailOverdueJobsFunction"} <= writers
    for name in functions:
        actions = _usage_actions(functions[name])
        if name in writers:
            assert "dynamodb:UpdateItem" in actions, f"{name} writes or ends jobs: it needs UpdateItem on UsageTable"
        else:
            assert not actions, f"{name} neither writes nor ends jobs: it must not touch UsageTable ({actions})"
        assert not actions & {"dynamodb:Scan", "dynamodb:DeleteItem", "dynamodb:PutItem"}, name
