"""Issue 36 item 3: the local stack's IAM lives in one folder, ``omnireel_local/iam/``, with one ``Principal``. Derived
from the package on disk: a module or class added outside the folder that evaluates policies, looks keys up in moto or
models the caller a second time fails here (local/IAM.md is the page on how a request is authorised)."""

from __future__ import annotations

import ast
from pathlib import Path

import omnireel_local

PACKAGE = Path(omnireel_local.__file__).parent
IAM = PACKAGE / "iam"
# What only the IAM folder may do, by the moto names it takes: search moto for a key, collect a key's policies, read
# a role's trust policy.
MOTO_IAM_READS = ("create_access_key(", "collect_policies(", ".access_keys", "assume_role_policy_document")
# The parts of a policy statement an evaluator must read (a module may write them: a template policy, a test user's).
STATEMENT_PARTS = {"Statement", "Effect", "NotAction", "NotResource", "NotPrincipal"}  # not "Condition": CloudFormation


def _modules() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def _outside(path: Path) -> bool:
    return IAM not in path.parents


def _statement_reads(tree: ast.Module) -> set[str]:
    """The statement parts read (``x["Effect"]``, ``x.get("Condition")``): a policy document evaluated."""
    reads: set[str] = set()
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if node.args else None
        if isinstance(key, ast.Constant) and key.value in STATEMENT_PARTS:
            reads.add(key.value)
    return reads


def test_one_principal_class_and_it_is_in_the_iam_folder() -> None:
    found = [
        path.relative_to(PACKAGE).as_posix()
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "Principal"
    ]
    assert found == ["iam/policy.py"]


def test_no_iam_module_outside_the_folder() -> None:
    """The IAM modules are ``iam/<name>.py``; none is left (or re-created) as ``<name>.py`` or ``iam_<name>.py``
    elsewhere, and no ``iam_*.py`` sits at the package's top. ``patches/iam_auth.py`` and ``patches/iam_ids.py`` are
    the moto patches that wire moto to the folder."""
    names = {p.stem for p in IAM.glob("*.py")} - {"__init__"}
    assert {"policy", "decision", "authorizer", "identities", "sigv4"} <= names
    for path in PACKAGE.rglob("*.py"):
        if _outside(path):
            assert path.stem not in names and path.stem.removeprefix("iam_") not in names, path
    assert sorted(p.name for p in PACKAGE.glob("iam_*.py")) == []


def test_policy_evaluation_and_key_lookups_are_only_in_the_folder() -> None:
    modules = _modules()
    assert _statement_reads(modules[IAM / "policy.py"]) == STATEMENT_PARTS  # the rule sees the evaluator
    assert [read for read in MOTO_IAM_READS if read in "".join(p.read_text() for p in IAM.glob("*.py"))]
    for path, tree in modules.items():
        if not _outside(path):
            continue
        name = path.relative_to(PACKAGE).as_posix()
        assert not _statement_reads(tree), f"{name} reads policy statements: only iam/policy.py evaluates them"
        text = path.read_text()
        assert not [read for read in MOTO_IAM_READS if read in text], name
