"""Every repository path the docs and the code cite exists, and every link between the docs lands (issue 36 item 5).

What is read:
- the Markdown pages: README.md, docs/**/*.md, local/README.md, local/IAM.md, local/UPSTREAM.md, relay/README.md,
  client/README.md (all of each page, code blocks included);
- the Python files under layers/, functions/, local/, cli/, client/, relay/, bench/, tests/, scripts/ and tooling/:
  their comments and docstrings, and in the code that is not a test every other string literal too (messages and help
  texts cite docs: "see docs/operations.md"); a test's other strings are data (made-up paths);
- template.yaml, Makefile, pyproject.toml, samconfig.toml: all of each file.

What counts as a cited path (the rule):
- a token that starts with a top-level folder of the repository and a slash (``docs/``, ``tests/``, ``layers/``,
  ``functions/``, ``local/``, ``bench/``, ``cli/``, ``client/``, ``relay/``, ``scripts/``, ``statemachine/``,
  ``events/``, ``requirements/``, ``tooling/``), not preceded by a letter, ``/``, ``.`` or ``-`` (so an S3 key
  ``jobs/<id>/...`` or ``omnireel/events/`` is not one), up to the first character that cannot be in a path; a trailing
  ``.``, ``,``, ``:`` or ``;`` is punctuation. It must exist: a file or a folder.
- a token that starts with a package folder (``omnireel/``, ``omnireel_local/``, ``omnireel_cli/``,
  ``omnireel_client/``, ``omnireel_relay/``, ``omnireel_template/``) and ends in ``.py`` or ``/`` is a path inside
  that package's folder (``omnireel/core/caller.py`` -> layers/omnireel/omnireel/core/caller.py). Without that ending
  it is a name, not a path (the CloudWatch namespaces ``omnireel/Admission``, ``omnireel/relay``).
- a pattern or a placeholder is not a path: a token followed by ``<``, ``*``, ``{``, ``$`` or ``…``
  (``functions/<name>/handler.py``, ``docs/events/*.v1.schema.json``), or holding ``...``;
- ``EXAMPLES``: the paths the checklists of docs/development.md make up on purpose (a step called thumbnail).

And in the Markdown pages, every relative link (``[text](target)``, not ``http:`` / ``mailto:``) names a file or
folder that exists, relative to the page (its target is not read as a cited path), and its ``#anchor`` names a heading
of the target page (GitHub's slugs) or an ``<a id="...">`` in it.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from omnireel_template import ROOT

TOP_FOLDERS = (
    "bench", "cli", "client", "docs", "events", "functions", "layers", "local", "relay", "requirements", "scripts",
    "statemachine", "tests", "tooling",
)  # fmt: skip
PACKAGES = {
    "omnireel/": "layers/omnireel/omnireel/",
    "omnireel_local/": "local/omnireel_local/",
    "omnireel_cli/": "cli/omnireel_cli/",
    "omnireel_client/": "client/omnireel_client/",
    "omnireel_relay/": "relay/omnireel_relay/",
    "omnireel_template/": "tooling/omnireel_template/",
}
EXAMPLES = {"functions/thumbnail", "functions/thumbnail/", "functions/thumbnail/handler.py", "events/thumbnail.json"}
MARKDOWN_PAGES = (
    "README.md", "local/README.md", "local/IAM.md", "local/UPSTREAM.md", "relay/README.md", "client/README.md",
)  # fmt: skip
PYTHON_FOLDERS = ("layers", "functions", "local", "cli", "client", "relay", "bench", "tests", "scripts", "tooling")
WHOLE_FILES = ("template.yaml", "Makefile", "pyproject.toml", "samconfig.toml")
SKIPPED_DIRS = {"__pycache__", "build", "node_modules", ".venv", ".aws-sam"}

_ROOTS = "|".join(re.escape(r) for r in (*TOP_FOLDERS, *(p.rstrip("/") for p in PACKAGES)))
TOKEN = re.compile(r"(?<![\w./\-~$@])((?:" + _ROOTS + r")/[\w./\-]*)")
LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
LINK_TARGET = re.compile(r"\]\([^)\s]+\)")


def cited_paths(text: str) -> Iterator[str]:
    """The repository paths ``text`` cites, by the rule in this module's docstring, as paths from the root."""
    for match in TOKEN.finditer(text):
        token, after = match.group(1), text[match.end() : match.end() + 1]
        if (after and after in "<*{$…") or "..." in token:
            continue
        token = token.rstrip(".,:;")
        package = next((p for p in PACKAGES if token.startswith(p)), None)
        if package is not None:
            if not token.endswith((".py", "/")):
                continue
            token = PACKAGES[package] + token[len(package) :]
        if token.rstrip("/") in {e.rstrip("/") for e in EXAMPLES}:
            continue
        yield token


def _python_texts(path: Path, every_string: bool) -> Iterator[str]:
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                docstrings.add(id(node.body[0].value))  # type: ignore[attr-defined]
                yield docstring
    if every_string:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                yield node.value


def _skipped(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return bool(SKIPPED_DIRS & set(parts)) or any(p.endswith(".egg-info") or p.startswith(".venv") for p in parts)


def markdown_pages() -> list[Path]:
    return [ROOT / p for p in MARKDOWN_PAGES] + sorted((ROOT / "docs").rglob("*.md"))


@functools.cache  # read and parsed once per test process: three tests below walk it
def sources() -> tuple[tuple[str, str], ...]:
    """(file, text) for every text the rule reads. A Markdown link's target is left to the link rule (it is relative
    to its page: docs/events.md links ``events/<name>.v1.schema.json``)."""
    return tuple(_sources())


def _sources() -> Iterator[tuple[str, str]]:
    for page in markdown_pages():
        yield str(page.relative_to(ROOT)), LINK_TARGET.sub("]()", page.read_text())
    for name in WHOLE_FILES:
        yield name, (ROOT / name).read_text()
    for folder in PYTHON_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if _skipped(path):
                continue
            name = str(path.relative_to(ROOT))
            for text in _python_texts(path, every_string=not name.startswith("tests/")):
                yield name, text


def broken_citations() -> list[str]:
    return sorted(
        {f"{name}: {path}" for name, text in sources() for path in cited_paths(text) if not (ROOT / path).exists()}
    )


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, ``_``, ``-`` and spaces kept),
    spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    found: set[str] = set(re.findall(r'<a id="([^"]+)"', text))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M):
        base = slug(heading)
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


def broken_links() -> list[str]:
    broken = []
    for page in markdown_pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            name = str(page.relative_to(ROOT))
            if not where.exists():
                broken.append(f"{name}: ({target}) names nothing")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{name}: ({target}) has no such heading")
    return broken


def test_every_cited_path_exists() -> None:
    broken = broken_citations()
    assert not broken, "cited paths that do not exist (fix the citation, or see the rule above):\n" + "\n".join(broken)


def test_every_link_between_the_docs_lands() -> None:
    broken = broken_links()
    assert not broken, "links that land nowhere:\n" + "\n".join(broken)


def test_the_rule_reads_the_docs_and_the_code() -> None:
    names = {name for name, _ in sources()}
    assert {"README.md", "docs/operations.md", "local/IAM.md", "template.yaml", "functions/api/handler.py"} <= names
    assert any(n.startswith("tests/") for n in names) and any(n.startswith("bench/") for n in names)
    assert sum(1 for name, text in sources() for _ in cited_paths(text)) > 500


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("see `tests/unit/api` (every error)", ["tests/unit/api"]),
        ("docs/operations.md, and [x](docs/cli.md).", ["docs/operations.md", "docs/cli.md"]),
        ("(`omnireel/core/caller.py`)", ["layers/omnireel/omnireel/core/caller.py"]),
        ("`omnireel_local/patches/`", ["local/omnireel_local/patches/"]),
        ("namespace omnireel/Admission, omnireel/relay", []),
        ("functions/<name>/handler.py, docs/events/*.v1.schema.json, events/{a,b}, tests/... ", []),
        ("s3://b/events/x.json, jobs/<id>/v.mp4, layers/omnireel/omnireel/jobs/", ["layers/omnireel/omnireel/jobs/"]),
        ("the example functions/thumbnail/handler.py", []),
    ],
)
def test_what_counts_as_a_cited_path(text: str, cited: list[str]) -> None:
    assert list(cited_paths(text)) == cited


def test_a_missing_path_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    assert not (ROOT / "tests/unit/api").exists()  # the citation the issue found stale, in this rule's terms
    assert list(cited_paths("(tests/unit/api: every error a route can raise)")) == ["tests/unit/api"]
    page = tmp_path / "a.md"
    page.write_text('# A page\n\n## Two words: `code`\n\n<a id="pinned"></a>\n```\n## not a heading\n```\n')
    assert anchors(page) == {"a-page", "two-words-code", "pinned"}


def test_examples_are_made_up() -> None:
    for example in EXAMPLES:
        assert not (ROOT / example).exists(), f"{example} exists now: drop it from EXAMPLES"
