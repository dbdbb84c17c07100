"""Which environment variables a process template's preloaded modules read at import.

A template (``omnireel_local.zygote``) imports modules once and forks children that replace its environment with
their own: a module that read a variable at import (module or class level, a default argument) keeps the template's
value in every child. ``import_time_env_reads`` runs a template's preload in a fresh interpreter and scans the source
of every module it imported for such reads.
"""

from __future__ import annotations

import json
import subprocess
import sys


def import_time_env_reads(preload: str, python: str = sys.executable) -> dict[str, list[str]]:
    """``preload`` ("module:function") run in ``python``: variable name (or what the read's argument evaluates to) ->
    the modules that read it at import."""
    done = subprocess.run([python, "-c", SCAN, preload], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


SCAN = """
import ast, json, sys

import importlib

module_name, function = sys.argv[1].split(":")
preload = getattr(importlib.import_module(module_name), function)
before = set(sys.modules)
preload()
ENV_CALLS = ("environ.get", "getenv", "environ.setdefault", "environ.pop", "environ.copy")


def reads(tree):
    found = []

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # the body runs when called; these at import
            for child in [*node.decorator_list, *node.args.defaults, *filter(None, node.args.kw_defaults)]:
                visit(child)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(ENV_CALLS):
            found.append(node.args[0] if node.args else ast.Constant("<the whole environment>"))
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            found.append(node.slice)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


out = {}
for name in sorted(set(sys.modules) - before):
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None) or ""
    if not path.endswith(".py"):
        continue
    with open(path, encoding="utf-8") as source:
        text = source.read()
    if "environ" not in text and "getenv" not in text:  # every read `reads` finds names one of them: nothing here
        continue
    tree = ast.parse(text)
    for arg in reads(tree):
        try:
            value = eval(compile(ast.Expression(arg), path, "eval"), vars(module))
        except Exception:
            value = "<unresolved: " + ast.unparse(arg) + ">"
        out.setdefault(str(value), []).append(name)
print(json.dumps(out))
"""
