"""Each bench script writes its marked section into the page its ``--out`` defaults to, and that page has the section
(issue 36 item 5 moved the sections to one page per bench under docs/benchmarks/). Derived from the scripts: the
section is the first argument of their ``emit`` / ``write_section`` call (or the default of their ``--section``), the
page the one ``REPO / "docs" / ...`` path they name. A moved section without its script's default, or a default
without its section, fails here (``write_section`` would append a new section at the end of the page instead)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from omnireel_template import ROOT

BENCH = ROOT / "bench"


def _docs_paths(tree: ast.AST) -> set[str]:
    """Every ``REPO / "docs" / ... / "x.md"`` path the script builds, as a path from the repository's root."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
            parts, left = [node.right.value], node.left
            while isinstance(left, ast.BinOp) and isinstance(left.right, ast.Constant):
                parts.insert(0, left.right.value)
                left = left.left
            path = "/".join(map(str, parts))
            if isinstance(left, ast.Name) and left.id == "REPO" and path.startswith("docs/") and path.endswith(".md"):
                found.add(path)
    return found


def _section(tree: ast.AST) -> str | None:
    """The section the script writes: ``emit("name", ...)`` / ``write_section("name", ...)``, or ``--section``'s
    default when the name comes from the command line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("emit", "write_section") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant):
                return str(first.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and getattr(node.args[0], "value", None) == "--section":
            return next(str(k.value.value) for k in node.keywords if k.arg == "default")  # type: ignore[attr-defined]
    return None


@functools.cache  # read once per test process: every parametrised case below asks for it
def bench_pages() -> dict[str, tuple[str, str]]:
    """Script -> (section, page) for every bench script that writes a marked section (do not change it: shared)."""
    found = {}
    for path in sorted(BENCH.glob("*.py")):
        tree = ast.parse(path.read_text())
        section, pages = _section(tree), _docs_paths(tree)
        if section is not None:
            assert len(pages) == 1, f"{path.name}: one default page expected, found {sorted(pages)}"
            found[path.name] = (section, pages.pop())
    return found


def test_the_rule_sees_the_benches() -> None:
    pages = bench_pages()
    assert len(pages) >= 10
    assert pages["cold_start.py"] == ("cold_start", "docs/benchmarks/cold-start.md")
    assert pages["capacity.py"] == ("capacity", "docs/capacity.md")


@pytest.mark.parametrize("script", sorted(bench_pages()))
def test_each_bench_writes_a_section_its_page_has(script: str) -> None:
    section, page = bench_pages()[script]
    text = (ROOT / page).read_text()
    assert text.count(f"<!-- bench:{section} -->") == 1, f"{page}: no (or a second) start marker of '{section}'"
    assert text.count(f"<!-- /bench:{section} -->") == 1, f"{page}: no (or a second) end marker of '{section}'"
    assert text.index(f"<!-- bench:{section} -->") < text.index(f"<!-- /bench:{section} -->")


def test_the_benchmarks_index_links_every_bench_page() -> None:
    index = (ROOT / "docs" / "benchmarks.md").read_text()
    for page in sorted(Path(ROOT / "docs" / "benchmarks").glob("*.md")):
        assert f"(benchmarks/{page.name})" in index, f"docs/benchmarks.md does not link {page.name}"
