"""The "Virtual environments" paragraph (docs/development.md, moved from the README by issue 36) names every venv the
Makefile builds, and `make demo` / `make test` build every venv they use without the reader running anything else
(issue 26 item 5)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _makefile() -> str:
    return (ROOT / "Makefile").read_text()


def makefile_venvs() -> set[str]:
    """Every venv directory the Makefile defines (``X_VENV := .venv-x`` and ``VENV := .venv``)."""
    return set(re.findall(r"^\w*VENV\s*:=\s*(\.venv[\w-]*)\s*$", _makefile(), re.M))


def documented_venvs() -> set[str]:
    doc = (ROOT / "docs" / "development.md").read_text()
    paragraph = doc[doc.index("**Virtual environments.**") :].split("\n\n", 1)[0]
    return set(re.findall(r"`(\.venv[\w-]*)`", paragraph))


def _prerequisites(target: str) -> set[str]:
    """The stamps a target depends on, followed through stamp rules (``$(DEV_STAMP): $(STAMP) $(EMU_STAMP) ...``)."""
    text = _makefile()
    rules = {m.group(1): m.group(2) for m in re.finditer(r"^(\$\(\w+\)|[\w-]+):\s*([^=\n#]*)", text, re.M)}
    seen: set[str] = set()
    todo = re.findall(r"\$\((?:\w+_)?STAMP\)", rules[target])
    while todo:
        stamp = todo.pop()
        if stamp in seen:
            continue
        seen.add(stamp)
        todo += re.findall(r"\$\((?:\w+_)?STAMP\)", rules.get(stamp, ""))
    return seen


def _stamp_dirs(stamps: set[str]) -> set[str]:
    """The venv each stamp lives in (``STAMP := $(VENV)/.installed`` -> .venv)."""
    text = _makefile()
    variables = dict(re.findall(r"^(\w+)\s*:=\s*(\S+)", text, re.M))
    out = set()
    for stamp in stamps:
        value = variables[stamp[2:-1]]
        while m := re.match(r"\$\((\w+)\)", value):
            value = value.replace(m.group(0), variables[m.group(1)])
        out.add(value.split("/")[0])
    return out


def test_the_docs_name_every_venv_the_makefile_builds() -> None:
    assert makefile_venvs() >= {".venv", ".venv-sam"}  # the reader sees the Makefile's definitions
    assert documented_venvs() == makefile_venvs()


def test_make_demo_and_make_test_build_every_venv_they_use() -> None:
    demo, test = _stamp_dirs(_prerequisites("demo")), _stamp_dirs(_prerequisites("test"))
    assert demo >= {".venv", ".venv-emulator"}
    assert test >= makefile_venvs() | {"node_modules"}


def test_the_venvs_build_in_parallel_where_they_do_not_extend_each_other() -> None:
    # make runs independent prerequisites side by side (MAKEFLAGS --jobs): the tool venvs wait only for uv, so they
    # build while .venv -> .venv-emulator -> .venv-dev (each extends the one before) are made.
    assert re.search(r"^MAKEFLAGS \+= --jobs=\d+", _makefile(), re.M)
    for tool in ("$(SAM_STAMP)", "$(CHECKOV_STAMP)", "$(AWS_STAMP)"):
        assert _stamp_dirs(_prerequisites(tool)) == {".venv-uv"}
    assert _stamp_dirs(_prerequisites("$(DEV_STAMP)")) == {".venv", ".venv-emulator", ".venv-uv"}
