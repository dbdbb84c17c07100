"""The fresh virtual environment with the client installed from this checkout (tests/e2e/test_client_docs.py), kept
between runs while nothing it is made from has changed.

``pip install ./client`` into a new Python 3.10 environment costs ~10 CPU-s and ~20 s of a worker on 2 cores (venv's
pip bootstrap, then pip building the client in isolation and installing its dependencies). The environment depends
only on the interpreter (its path and version, which also fix the pip that ``venv`` bootstraps), the install command
and client/'s files (``install_inputs``); it is kept under .aws-sam/client-venv/<digest>, as scripts/lint-once keeps
a passing check, and a repeated `make test` with none of those changed runs the examples in it. Any change installs
again (the old environment is removed), a clean checkout (.ci/run) always installs, and ``CLIENT_VENV_CACHE=0``
installs regardless. The environment is built where it stays (a venv cannot move: its scripts name their
interpreter), under a lock, and counts as installed only once its marker is written after a complete install.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_CACHE = ROOT / ".aws-sam" / "client-venv"
LEFTOVERS = {"build", "__pycache__"}  # with *.egg-info: what pip or setuptools may write into client/


def install_inputs(python: str, install: list[str], client: Path = ROOT / "client") -> str:
    """A digest of what the environment is made from: ``python`` (path and version), the install command and every
    file of ``client`` but build leftovers."""
    digest = hashlib.sha256()
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True,
                             timeout=30, check=True).stdout  # fmt: skip
    for part in (python, version, *install):
        digest.update(part.encode() + b"\0")
    for path in sorted(client.rglob("*")):
        parts = path.relative_to(client).parts
        if path.is_file() and not LEFTOVERS & set(parts) and not any(p.endswith(".egg-info") for p in parts):
            digest.update("/".join(parts).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def client_venv(
    python: str,
    install: list[str],
    *,
    client: Path = ROOT / "client",
    cache: Path = VENV_CACHE,
    venv_options: tuple[str, ...] = (),
    timeout_s: float = 600,
) -> Path:
    """The environment's interpreter: ``python -m venv`` and then ``<venv python> *install``, or the kept one."""
    home = cache / install_inputs(python, install, client)
    installed, target = home / "installed", home / "venv" / "bin" / "python"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.environ.get("CLIENT_VENV_CACHE", "1") != "0" and installed.is_file() and target.is_file():
            return target
        for old in cache.iterdir():  # another set of inputs, or an install that did not finish
            if old.is_dir():
                shutil.rmtree(old)
        home.mkdir()
        subprocess.run([python, "-m", "venv", *venv_options, str(home / "venv")], check=True, timeout=120)
        done = subprocess.run([str(target), *install], capture_output=True, text=True, timeout=timeout_s, cwd=home)
        assert done.returncode == 0, done.stderr[-3000:]
        installed.write_text(" ".join(install) + "\n")
    return target
