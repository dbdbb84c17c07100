"""The client's installed environment is kept only while nothing it is made from changes (tests/support/client_venv.py):
the digest follows the interpreter, the install command and client/'s files, not build leftovers; a kept environment
is reused only with its marker; a change, a missing marker or CLIENT_VENV_CACHE=0 installs again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.client_venv import client_venv, install_inputs

# Counts its runs in the environment's home (the install runs there): a cheap stand-in for pip.
INSTALL = ["-c", "open('runs', 'a').write('x')"]


@pytest.fixture
def client(tmp_path: Path) -> Path:
    folder = tmp_path / "client"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[project]\nname = 'c'\n")
    (folder / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return folder


def test_the_digest_follows_the_inputs_and_not_the_build_leftovers(client: Path) -> None:
    before = install_inputs(sys.executable, INSTALL, client)
    assert install_inputs(sys.executable, INSTALL, client) == before
    for leftover in ("build/lib/pkg/__init__.py", "c.egg-info/PKG-INFO", "pkg/__pycache__/x.pyc"):
        (client / leftover).parent.mkdir(parents=True, exist_ok=True)
        (client / leftover).write_text("anything")
    assert install_inputs(sys.executable, INSTALL, client) == before
    assert install_inputs(sys.executable, [*INSTALL, "-q"], client) != before
    (client / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    changed = install_inputs(sys.executable, INSTALL, client)
    assert changed != before
    (client / "pkg" / "new.py").write_text("")
    assert install_inputs(sys.executable, INSTALL, client) not in (before, changed)


def test_a_kept_environment_is_reused_until_an_input_changes(client: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CLIENT_VENV_CACHE", raising=False)
    cache = tmp_path / "cache"

    def made() -> Path:
        return client_venv(sys.executable, INSTALL, client=client, cache=cache, venv_options=("--without-pip",))

    first = made()
    home = first.parents[2]
    assert first.is_file() and (home / "runs").read_text() == "x"
    (home / "sentinel").write_text("")  # gone when the home is made again
    assert made() == first and (home / "sentinel").exists()  # reused: not installed again
    assert (home / "runs").read_text() == "x"

    (client / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    second = made()
    assert second != first and (second.parents[2] / "runs").read_text() == "x"
    assert not home.exists()  # the environment of the old inputs is gone
    home = second.parents[2]

    (home / "sentinel").write_text("")
    (home / "installed").unlink()  # an install that did not finish
    assert made() == second and not (home / "sentinel").exists() and (home / "installed").is_file()

    (home / "sentinel").write_text("")
    monkeypatch.setenv("CLIENT_VENV_CACHE", "0")
    assert made() == second and not (home / "sentinel").exists()  # installed again, from scratch


def test_a_failed_install_leaves_no_marker(client: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(AssertionError, match="boom"):
        client_venv(sys.executable, ["-c", "raise SystemExit('boom')"], client=client, cache=cache,
                    venv_options=("--without-pip",))  # fmt: skip
    assert not list(cache.glob("*/installed"))
