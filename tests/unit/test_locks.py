"""The lock files every venv is installed from (issue 35 item 4): each pin of requirements/*.txt is in its venv's lock
at the same version (an edited pin without `make lock` fails here, not on someone's machine), every requirement of a
lock carries its hashes, the layered venvs' locks add to each other without overlap, and each venv's make rule
installs from its lock."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.lock_requirements import STACK, TOOLS, blocks

ROOT = Path(__file__).resolve().parents[2]
REQ = ROOT / "requirements"
LOCK = REQ / "lock"
FIX = "run `make lock` (scripts/lock_requirements.py) and commit requirements/lock/"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name[extras]==version` in a requirements file, following `-r`."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out |= pins((path.parent / line[3:].strip()).resolve())
        elif m := re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==(\S+)", line):
            out[norm(m[1])] = m[3]
    return out


def locked(name: str) -> dict[str, str]:
    """name -> version of a lock file's requirements."""
    out = {}
    for key in blocks((LOCK / f"{name}.txt").read_text()):
        m = re.match(r"([a-z0-9_.-]+)==(\S+)", key)
        assert m, key
        out[norm(m[1])] = m[2]
    return out


def test_every_pin_is_in_its_venvs_lock_at_the_same_version() -> None:
    closure: dict[str, str] = {}
    for name, inputs in STACK:  # a layer's lock adds to the ones it extends
        closure |= locked(name)
        for source in inputs:
            wrong = {k: (v, closure.get(k)) for k, v in pins(REQ / source).items() if closure.get(k) != v}
            assert not wrong, f"requirements/{source} pins (wanted, locked) {wrong}: {FIX}"
    for name, source in TOOLS:
        lock = locked(name)
        wrong = {k: (v, lock.get(k)) for k, v in pins(REQ / source).items() if lock.get(k) != v}
        assert not wrong, f"requirements/{source} pins (wanted, locked) {wrong}: {FIX}"


def test_the_stack_locks_follow_constraints_txt() -> None:
    stack: dict[str, str] = {}
    for name, _ in STACK:
        stack |= locked(name)
    wrong = {k: (v, stack[k]) for k, v in pins(REQ / "constraints.txt").items() if k in stack and stack[k] != v}
    assert not wrong, f"requirements/constraints.txt (wanted, locked) {wrong}: {FIX}"


def test_the_layered_locks_do_not_overlap() -> None:
    seen: dict[str, str] = {}
    for name, _ in STACK:
        for package in locked(name):
            assert package not in seen, f"{package} is in both {seen.get(package)}.txt and {name}.txt: {FIX}"
            seen[package] = name


def test_every_requirement_carries_hashes_and_no_index_is_named() -> None:
    locks = sorted(LOCK.glob("*.txt"))
    assert {p.stem for p in locks} == {n for n, _ in STACK} | {n for n, _ in TOOLS}
    for path in locks:
        text = path.read_text()
        assert "://" not in text and "--index-url" not in text, f"{path.name} names an index"
        for key, block in blocks(text).items():
            assert re.search(r"--hash=sha256:[0-9a-f]{64}", block), f"{path.name}: {key} has no hash"


def test_each_venv_rule_installs_from_its_lock_with_hashes_required() -> None:
    makefile = (ROOT / "Makefile").read_text()
    used = set(re.findall(r"\$\(LOCK\)/(\w+)\.txt", makefile))
    assert used == {n for n, _ in STACK} | {n for n, _ in TOOLS}
    assert "--require-hashes --no-deps" in makefile and "pip sync --quiet --require-hashes" in makefile
    assert not re.search(r"\bpip\b[^\n]*install[^\n]*-r requirements/(?!lock/)", makefile)
