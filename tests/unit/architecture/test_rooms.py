"""Issue 36 item 1: every word in its room. Beside the fence (test_boundaries.py), derived from the code:

- a name that modules of three or more capability folders import is a shared word and lives in ``core/``;
- the import arrows between capability folders do not grow (a ceiling, counted when the shared words moved).

Imports are read from the source as the fence reads them (every ``import`` statement, inside functions too).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.unit.architecture.test_boundaries import PACKAGE, layer_of

# Counted by ``import_arrows`` when issue 36 moved the shared words (before the move: 124 arrows, 45 folder pairs).
# Lower them when a change removes arrows; never raise them to let one in.
MAX_ARROWS = 123
MAX_FOLDER_PAIRS = 44

SHARED = 3  # capability folders importing one name that make it a shared word
# Models and rules imported by three or more folders that stay in their own room, and why. (Adapters, use cases and
# the Lambda runtime are not words: they live in their layer's room, ``aws/``, a capability or ``runtime/``.)
NOT_IN_CORE = {
    # the job is the jobs room's record, as the batch is the batches room's: who talks about a job imports it from there
    "jobs.job.Job": "the job record",
    "jobs.job.JobStatus": "a field of the job record",
    "jobs.job.JobError": "a field of the job record",
    "jobs.job.BatchRef": "a field of the job record",
    "jobs.request.JobRequest": "a field of the job record: what the job was asked to make",
    # what consumers receive is the events room's: it builds them, the adapters publish them
    "events.job_events.JobEvent": "the job event",
    "events.batch_events.BatchEvent": "the batch.completed event",
}


def _folder_and_module(path: Path, package: Path) -> tuple[str, str] | None:
    """(capability folder, dotted module) of a file of the package; None for the package's own ``__init__``."""
    parts = path.relative_to(package).with_suffix("").parts
    return (parts[0], ".".join(parts)) if len(parts) > 1 else None


def _imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)]


def import_arrows(package: Path = PACKAGE) -> set[tuple[str, str, str]]:
    """Every (from folder, to folder, importing module) where a module of one capability folder imports
    ``omnireel.<another folder>...`` (``from ... import`` or ``import``)."""
    root = package.name
    arrows: set[tuple[str, str, str]] = set()
    for path in package.rglob("*.py"):
        if (place := _folder_and_module(path, package)) is None:
            continue
        folder, module = place
        for node in _imports(path):
            if isinstance(node, ast.ImportFrom):
                targets = [node.module] if node.module and node.level == 0 else []
            else:
                targets = [alias.name for alias in node.names]
            for target in targets:
                parts = target.split(".")
                if parts[0] == root and len(parts) > 1 and parts[1] != folder:
                    arrows.add((folder, parts[1], module))
    return arrows


def shared_names(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every name imported with ``from omnireel.<module> import <name>`` (a module's name excluded: modules are not
    words) -> the capability folders whose modules import it (its own folder included)."""
    root = package.name
    modules = {m for path in package.rglob("*.py") if (place := _folder_and_module(path, package)) for m in [place[1]]}
    users: dict[str, set[str]] = defaultdict(set)
    for path in package.rglob("*.py"):
        if (place := _folder_and_module(path, package)) is None:
            continue
        for node in _imports(path):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(root + "."):
                module = node.module.removeprefix(root + ".")  # type: ignore[union-attr]
                for alias in node.names:
                    if f"{module}.{alias.name}" not in modules:
                        users[f"{module}.{alias.name}"].add(place[0])
    return users


def misplaced_words(package: Path, layers: dict[str, str], allowed: dict[str, str]) -> dict[str, list[str]]:
    """Models-and-rules names imported by ``SHARED`` or more folders that live outside ``core/`` -> those folders."""
    return {
        name: sorted(folders)
        for name, folders in shared_names(package).items()
        if len(folders) >= SHARED
        and not name.startswith("core.")
        and layers.get(name.rpartition(".")[0]) == "models and rules"
        and name not in allowed
    }


def test_a_name_three_capability_folders_import_lives_in_core() -> None:
    misplaced = misplaced_words(PACKAGE, layer_of(), NOT_IN_CORE)
    assert not misplaced, f"shared words outside core/ (move them there, or say in NOT_IN_CORE why not): {misplaced}"


def test_every_exception_is_still_a_shared_word_outside_core() -> None:
    """An exception that no longer applies (the name moved, or fewer folders import it) is removed, not kept."""
    users = shared_names()
    stale = {name for name in NOT_IN_CORE if len(users.get(name, set())) < SHARED}
    assert not stale, f"NOT_IN_CORE entries that are no longer shared by {SHARED} folders: {sorted(stale)}"


def test_the_import_arrows_between_capability_folders_do_not_grow() -> None:
    arrows = import_arrows()
    pairs = {(source, target) for source, target, _ in arrows}
    assert len(arrows) <= MAX_ARROWS, f"{len(arrows)} arrows between capability folders, at most {MAX_ARROWS}"
    assert len(pairs) <= MAX_FOLDER_PAIRS, f"{len(pairs)} folder pairs, at most {MAX_FOLDER_PAIRS}: {sorted(pairs)}"


def test_the_rules_see_a_shared_word_and_an_arrow(tmp_path: Path) -> None:
    """Both checks can fail: a word of ``a/`` imported by ``b/`` and ``c/`` is caught, its arrows are counted, and a
    word in ``core/`` or an imported module is not a misplaced word."""
    package = tmp_path / "omnireel"
    for folder in ("a", "b", "c", "core"):
        (package / folder).mkdir(parents=True)
    (package / "a" / "words.py").write_text("CLOCK = 1\n")
    (package / "core" / "clock.py").write_text("NOW = 1\n")
    uses = "from omnireel.a.words import CLOCK\nfrom omnireel.core.clock import NOW\nfrom omnireel.a import words\n"
    (package / "a" / "user.py").write_text(uses)
    (package / "b" / "user.py").write_text(uses)
    (package / "c" / "user.py").write_text("def f():\n    " + uses.replace("\n", "\n    ") + "import omnireel.b.user\n")
    layers = {"a.words": "models and rules", "core.clock": "models and rules", "a.user": "use cases"}
    assert misplaced_words(package, layers, {}) == {"a.words.CLOCK": ["a", "b", "c"]}
    assert misplaced_words(package, layers, {"a.words.CLOCK": "a reason"}) == {}
    assert import_arrows(package) == {
        ("a", "core", "a.user"),
        ("b", "a", "b.user"),
        ("b", "core", "b.user"),
        ("c", "a", "c.user"),
        ("c", "core", "c.user"),
        ("c", "b", "c.user"),
    }
