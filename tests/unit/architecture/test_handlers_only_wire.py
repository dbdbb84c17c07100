"""Handlers only wire (issue 36 item 2): rules derived from the handlers on disk (``functions/*/handler.py``, read as
source) and from the domain package.

**(a) Adapters come from the factories.** No handler module constructs an adapter or an AWS client itself: it calls
the factories of ``omnireel.aws.adapters``. An *adapter* is any class defined in a module of ``omnireel/aws/`` (read
from the source, so a new adapter is covered the day it is written); a *client* is anything called from
``omnireel.aws.clients``, ``boto3`` or ``botocore``.

**(b) One use case per invocation path.** A *use case* is a module the package's layer map (the ``omnireel``
docstring, also read by ``test_boundaries.py``) lists under "use cases": the map calls each one operation, so an
operation's own helpers (its parser, its view) are part of it. A handler *calls* a use case when it calls a name
imported from that module, or a method of a module-level object built by calling such a name (``gate = Gate(...)``:
``gate.acquire(...)`` calls ``admission.gate``). Calls into the adapters (``aws/``), ``runtime/``, ``core/`` and the
models and rules are not use cases. For every function of a handler module, along every path through it, at most one
use case is called. A path: an ``if`` takes one branch, a loop body counts once (one record), a ``try`` runs its body
and then its ``else`` or one ``except``, then its ``finally``; a function of the same module that is called or passed
along (a callback is a call) adds its own paths.

**(c) Error mapping starts nothing.** A function registered as an exception handler (``@app.exception_handler``,
``@app.not_found``) calls no use case on any path, listed or not: it maps an error to a response.

One listed exception to (b), ``INPUT_CHECKS``: a route may check its input with ``webhooks.submit_check`` before its
one use case, as it parses its body (below: why).
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.architecture.test_boundaries import documented_layers

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "layers" / "omnireel" / "omnireel"
HANDLERS = sorted((ROOT / "functions").glob("*/handler.py"))
SDK_PREFIXES = ("omnireel.aws.clients", "boto3", "botocore")
# Use cases a path may call besides its one, and why.
INPUT_CHECKS = {
    "webhooks.submit_check": (
        "the request's input check: where its webhook may be sent (https, public addresses, a bounded DNS lookup; "
        "nothing written, nothing started). POST /jobs, /batches and /batches/uploads check it before their use "
        "case, as they parse the body; folding it into jobs.submission, batches.intake and batches.uploads would add "
        "three import arrows between the rooms, which test_rooms.py keeps from growing"
    ),
}
ERROR_HANDLER_DECORATORS = (".exception_handler", ".not_found")

Path_ = frozenset[str]  # the use-case modules one path through a function calls
Flow = tuple[set[Path_], set[Path_]]  # the paths through a block that go on after it, and those that return or raise
Functions = dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


def adapter_classes() -> set[str]:
    """Every class defined in ``omnireel/aws/``, by qualified name (``omnireel.aws.job_store.JobStore``)."""
    found = set()
    for path in (PACKAGE / "aws").rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        found |= {f"{module}.{node.name}" for node in tree.body if isinstance(node, ast.ClassDef)}
    return found


def use_case_modules() -> set[str]:
    return {f"omnireel.{module}" for module in documented_layers()["use cases"]}


@dataclass
class HandlerModule:
    """A handler module as the rules read it: what its names are bound to, its functions, its use-case objects."""

    tree: ast.Module
    use_cases: set[str]
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    functions: Functions = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)  # module-level name -> the use case that built it

    def __post_init__(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    self.imports[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call)]  # the outermost first
                built = next((m for call in calls if (m := self.use_case_of(call.func))), None)
                self.objects |= {t.id: built for t in targets if built and isinstance(t, ast.Name)}

    def qualified(self, node: ast.expr) -> str | None:
        """``a.b.c`` with ``a`` imported: the qualified name it refers to."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.imports:
            return ".".join([self.imports[node.id], *reversed(parts)])
        return None

    def use_case_of(self, func: ast.expr) -> str | None:
        """The use-case module a call of ``func`` enters, if any."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.objects:
            return self.objects[func.value.id]
        name = self.qualified(func)
        while name:
            if name in self.use_cases:
                return name.removeprefix("omnireel.")
            name = name.rpartition(".")[0]
        return None

    def constructed_adapters(self, adapters: set[str]) -> list[str]:
        """Every call in the module that builds an adapter or a client itself (rule a)."""
        found = []
        for node in sorted((n for n in ast.walk(self.tree) if isinstance(n, ast.Call)), key=lambda n: n.lineno):
            name = self.qualified(node.func) or ""
            if name in adapters or any(name == p or name.startswith(p + ".") for p in SDK_PREFIXES):
                found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...) [{name}]")
        return found

    # ------------------------------------------------------------------ paths (rule b)
    def paths(self, function: ast.FunctionDef | ast.AsyncFunctionDef, stack: tuple[str, ...] = ()) -> set[Path_]:
        """The use cases each path through ``function`` calls (paths that go on and paths that return or raise)."""
        nested = {
            n.name: n
            for n in ast.walk(function)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not function
        }
        going, ended = self._block(function.body, {**self.functions, **nested}, (*stack, function.name))
        return going | ended

    def _block(self, body: list[ast.stmt], local: Functions, stack: tuple[str, ...]) -> Flow:
        going: set[Path_] = {frozenset()}
        ended: set[Path_] = set()
        for statement in body:
            step_going, step_ended = self._statement(statement, local, stack)
            ended |= _then(going, step_ended)
            going = _then(going, step_going)
        return going, ended

    def _statement(self, node: ast.stmt, local: Functions, stack: tuple[str, ...]) -> Flow:
        block = self._block
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return {frozenset()}, set()  # a nested function counts where it is called or passed along
        if isinstance(node, (ast.Return, ast.Raise)):
            return set(), self._expression(node, local, stack)
        if isinstance(node, (ast.If, ast.Match)):
            head = self._expression(node.test if isinstance(node, ast.If) else node.subject, local, stack)
            branches = [node.body, node.orelse] if isinstance(node, ast.If) else [case.body for case in node.cases]
            flows = [block(branch, local, stack) for branch in branches]
            going = set().union(*(flow[0] for flow in flows))
            if isinstance(node, ast.Match):
                going.add(frozenset())  # no case matched
            return _then(head, going), _then(head, set().union(*(flow[1] for flow in flows)))
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            head = self._expression(node.test if isinstance(node, ast.While) else node.iter, local, stack)
            body_going, body_ended = block(node.body, local, stack)
            else_going, else_ended = block(node.orelse, local, stack)
            once = _then(head, body_going | {frozenset()})
            return _then(once, else_going), _then(head, body_ended) | _then(once, else_ended)
        if isinstance(node, (ast.Try, ast.TryStar)):
            body_going, body_ended = block(node.body, local, stack)
            else_going, else_ended = block(node.orelse, local, stack)
            handled = [block(handler.body, local, stack) for handler in node.handlers]
            raised = body_going | body_ended  # a handler runs after (at most) the whole body
            going = _then(body_going, else_going) | _then(raised, set().union(*(h[0] for h in handled)))
            ended = body_ended | _then(body_going, else_ended) | _then(raised, set().union(*(h[1] for h in handled)))
            final_going, _ = block(node.finalbody, local, stack)
            return _then(going, final_going), _then(ended, final_going)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            head: set[Path_] = {frozenset()}
            for item in node.items:
                head = _then(head, self._expression(item.context_expr, local, stack))
            body_going, body_ended = block(node.body, local, stack)
            return _then(head, body_going), _then(head, body_ended)
        return self._expression(node, local, stack), set()

    def _expression(self, node: ast.AST, local: Functions, stack: tuple[str, ...]) -> set[Path_]:
        """Every call in a simple statement or expression, in sequence; a local function named in it adds its paths."""
        called: set[str] = set()
        paths: set[Path_] = {frozenset()}
        for child in ast.walk(node):
            if isinstance(child, ast.Call) and (module := self.use_case_of(child.func)):
                called.add(module)
            elif isinstance(child, ast.Name) and child.id in local and child.id not in stack:
                paths = _then(paths, self.paths(local[child.id], stack))
        return _then(paths, {frozenset(called)})

    def error_handlers(self) -> list[str]:
        return [
            name
            for name, function in self.functions.items()
            if any(ast.unparse(d).split("(")[0].endswith(ERROR_HANDLER_DECORATORS) for d in function.decorator_list)
        ]


def _then(first: set[Path_], second: set[Path_]) -> set[Path_]:
    return {a | b for a, b in itertools.product(first, second)}


def read(source: str) -> HandlerModule:
    return HandlerModule(ast.parse(source), use_case_modules())


def too_many_use_cases(module: HandlerModule) -> dict[str, list[str]]:
    """Functions with a path that calls more than one use case (rule b), or, for an error handler, any (rule c)."""
    found = {}
    for name, function in module.functions.items():
        error_handler = name in module.error_handlers()
        paths = module.paths(function)
        counted = [path if error_handler else path - set(INPUT_CHECKS) for path in paths]
        worst = max(counted, key=len)
        if len(worst) > (0 if error_handler else 1):
            found[name] = sorted(worst)
    return found


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.parent.name)
def test_a_handler_builds_its_adapters_through_the_factories(path: Path) -> None:
    constructed = read(path.read_text()).constructed_adapters(adapter_classes())
    assert not constructed, f"{path.parent.name}: build these with omnireel.aws.adapters' factories: {constructed}"


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.parent.name)
def test_every_path_through_a_handler_calls_one_use_case_and_error_mapping_none(path: Path) -> None:
    found = too_many_use_cases(read(path.read_text()))
    assert not found, (
        f"{path.parent.name}: a path through these functions calls more than one use case (or an error handler calls "
        f"one); make the sequence one use case in the domain package: {found}"
    )


# ------------------------------------------------------------------------------------- the rules can fail
def test_the_rules_see_adapters_clients_use_cases_and_objects() -> None:
    assert {"omnireel.aws.job_store.JobStore", "omnireel.aws.inbox_store.InboxStore"} <= adapter_classes()
    assert {"omnireel.jobs.steps", "omnireel.admission.gate", "omnireel.webhooks.dispatch"} <= use_case_modules()
    assert "omnireel.jobs.job" not in use_case_modules()  # a model: calling its helpers is not a use case
    module = read(
        "from omnireel.admission.gate import Gate\nfrom omnireel.aws.inbox_store import InboxStore\n"
        "from omnireel.aws import clients, adapters\nimport boto3\n"
        "gate = Gate(store=adapters.admission_store(s), jobs=None, callbacks=None)\n"
        "inbox = InboxStore()\nsqs = clients.client('sqs')\ns3 = boto3.client('s3')\njobs = adapters.job_store(s)\n"
    )
    assert module.objects == {"gate": "admission.gate"}
    built = [line.split(": ", 1)[1].split("(")[0] for line in module.constructed_adapters(adapter_classes())]
    assert built == ["InboxStore", "clients.client", "boto3.client"]


def test_the_path_rule_catches_a_sequence_a_callback_and_an_error_mapper_that_starts_a_use_case() -> None:
    module = read(
        "from omnireel.jobs.steps import generate_image, invoke_video\n"
        "from omnireel.jobs.staging import stage_video_request\n"
        "from omnireel.jobs.outcome import finish_job\nfrom omnireel.webhooks.dispatch import process_record\n"
        "from omnireel.webhooks.signing import delivery_secrets\nfrom omnireel.jobs.job import job_id_of_execution\n"
        "from omnireel.admission.gate import Gate\ngate = Gate()\n"
        "def sequence(e, c):\n    image = generate_image(1)\n    stage_video_request(1, png=image)\n"
        "def branches(e, c):\n    if e:\n        generate_image(job_id_of_execution(e))\n"
        "    try:\n        finish_job(1)\n    except ValueError:\n        pass\n"
        "def admitted(e, c):\n    if not gate.acquire(e):\n        return None\n    invoke_video(e)\n"
        "def _attempt(q):\n    return delivery_secrets(q)\n"
        "def callback(e, c):\n    return process_record(e, attempt=_attempt)\n"
        "def nested(e, c):\n    def later():\n        finish_job(1)\n    return process_record(e, backoff=later)\n"
        "def via_helper(e, c):\n    _fail(e)\n    return generate_image(e)\n"
        "def _fail(e):\n    finish_job(e)\n"
        "@app.exception_handler(list(ERRORS))\ndef domain_error(exc):\n    _fail(exc)\n"
        "@app.not_found\ndef not_found(exc):\n    return 404\n"
    )
    assert too_many_use_cases(module) == {
        "sequence": ["jobs.staging", "jobs.steps"],
        "branches": ["jobs.outcome", "jobs.steps"],  # the if's branch, then the try
        "admitted": ["admission.gate", "jobs.steps"],
        "callback": ["webhooks.dispatch", "webhooks.signing"],
        "nested": ["jobs.outcome", "webhooks.dispatch"],
        "via_helper": ["jobs.outcome", "jobs.steps"],
        "domain_error": ["jobs.outcome"],
    }
    one_each = read(
        "from omnireel.jobs.outcome import finish_job\nfrom omnireel.admission.expiry import expire_job\n"
        "def handler(e, c):\n    if e:\n        x = expire_job(e)\n    else:\n        x = finish_job(e)\n"
        "    for r in e:\n        finish_job(r)\n    return x\n"
    )
    assert too_many_use_cases(one_each) == {"handler": ["admission.expiry", "jobs.outcome"]}  # the loop after a branch
    checked = read(
        "from omnireel.jobs.submission import submit_job\nfrom omnireel.jobs.outcome import finish_job\n"
        "from omnireel.webhooks.submit_check import check_webhook_target\n"
        "def create(e, c):\n    check_webhook_target(e)\n    return submit_job(e)\n"
        "def twice(e, c):\n    check_webhook_target(e)\n    submit_job(e)\n    finish_job(e)\n"
        "@app.exception_handler(E)\ndef mapper(exc):\n    check_webhook_target(exc)\n"
    )
    assert too_many_use_cases(checked) == {
        "twice": ["jobs.outcome", "jobs.submission"],
        "mapper": ["webhooks.submit_check"],
    }
    single = read(
        "from omnireel.jobs.outcome import finish_job\nfrom omnireel.admission.expiry import expire_job\n"
        "def handler(e, c):\n    if e:\n        return expire_job(e)\n    return finish_job(e)\n"
    )
    assert too_many_use_cases(single) == {}  # the branch returns: one use case on each path
