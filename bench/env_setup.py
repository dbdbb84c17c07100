"""First-run set-up of every environment `make test` needs, pip (before issue 35) vs uv, side by side in one run.

    python3 bench/env_setup.py [--repo PATH] [--out docs/benchmarks/env-setup.md|-] [--keep]

Two fresh clones of the same repository: one at the last commit whose Makefile installed with pip (the parent of the
commit that added requirements/lock/), one at HEAD (uv from the locks, the environments in parallel). Each runs what a
first `make test` builds before its tests (.venv-uv, .venv, .venv-emulator, .venv-dev, .venv-sam, .venv-checkov,
.venv-aws, node_modules) with an empty pip cache, resp. an empty uv cache (their own temporary directories: nothing
cached from earlier runs). Then the uv clone once more from scratch with the cache the first uv run left (a second
clone on the same machine, or a CI machine that keeps its cache). Sequential, never both at once. Reports wall time,
the load average around each arm (the machine is shared), and every venv's size. The clones are removed (--keep
keeps them, for a `make test` in the uv clone).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import emit, machine, table

REPO = Path(__file__).resolve().parents[1]
PIP_TARGETS = ["dev-venv", "sam-venv", "checkov-venv", "aws-cli", "node_modules/.installed"]
UV_TARGETS = ["envs"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=60).stdout


def pip_rev() -> str:
    first = git("log", "--diff-filter=A", "--format=%H", "--", "requirements/lock/venv.txt").split()[-1]
    return git("rev-parse", f"{first}^").strip()


def du_mib(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True, timeout=120).stdout
    return int(out.split()[0]) / 1024


def arm(repo: str, rev: str, targets: list[str], workdir: Path, name: str, env: dict[str, str]) -> dict:
    clone = workdir / name
    subprocess.run(["git", "clone", "-q", repo, str(clone)], check=True, timeout=300)
    subprocess.run(["git", "checkout", "-q", rev], cwd=clone, check=True, timeout=60)
    load = os.getloadavg()[0]
    started = time.monotonic()
    result = subprocess.run(["make", *targets], cwd=clone, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"{name}: make {' '.join(targets)} failed ({result.returncode})")
    sizes = {p.name: du_mib(p) for p in sorted(clone.glob(".venv*")) if p.is_dir()}
    return {"seconds": seconds, "load": (load, os.getloadavg()[0]), "sizes": sizes, "clone": clone}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--out", default=None, help="default docs/benchmarks/env-setup.md; '-' = print only")
    parser.add_argument("--keep", action="store_true", help="keep the clones")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="omnireel-env-setup-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMNIREEL_", "VIRTUAL_ENV", "AWS_", "UV_"))}
    pip_env = {**base, "PIP_CACHE_DIR": str(workdir / "pip-cache")}
    # uv's arms: their own empty pip cache too (pip installs uv itself into .venv-uv).
    uv_env = {**base, "UV_CACHE_DIR": str(workdir / "uv-cache"), "PIP_CACHE_DIR": str(workdir / "pip-cache-uv")}
    old, new = pip_rev(), git("rev-parse", "HEAD").strip()
    try:
        pip = arm(args.repo, old, PIP_TARGETS, workdir, "pip", pip_env)
        uv = arm(args.repo, new, UV_TARGETS, workdir, "uv", uv_env)
        warm = arm(args.repo, new, UV_TARGETS, workdir, "uv-warm", uv_env)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept: {workdir}")
    rows = [
        [f"pip, one at a time (`make {' '.join(PIP_TARGETS)}` at {old[:7]})", "empty pip cache", pip],
        [f"uv from the locks, in parallel (`make envs` at {new[:7]})", "empty uv cache", uv],
        ["uv again in a new clone", "the cache the run above left", warm],
    ]
    text = "\n".join(
        [
            "## Environment set-up: pip vs uv (`bench/env_setup.py`)",
            "",
            f"Command: `python3 bench/env_setup.py` (fresh clones of {args.repo} in /tmp, each building every "
            f"environment a first `make test` needs before its tests, one arm after the other); {machine()}. The "
            "machine was shared with other work: the load average (2 cores) is given before/after each arm.",
            "",
            table(
                ["how", "cache", "wall time", "load before/after"],
                [
                    [how, cache, f"**{a['seconds']:.0f} s**", f"{a['load'][0]:.1f} / {a['load'][1]:.1f}"]
                    for how, cache, a in rows
                ],
            ),
            "",
            f"Speed-up, first run: {pip['seconds'] / uv['seconds']:.1f}x; with uv's cache: "
            f"{pip['seconds'] / warm['seconds']:.1f}x.",
            "",
            table(
                ["venv", "pip (MiB on disk)", "uv (MiB on disk)"],
                [
                    [f"`{n}`", f"{pip['sizes'].get(n, 0):.0f}", f"{uv['sizes'].get(n, 0):.0f}"]
                    for n in sorted(set(pip["sizes"]) | set(uv["sizes"]))
                ],
            ),
        ]
    )
    emit("env_setup", text, args.out or str(REPO / "docs" / "benchmarks" / "env-setup.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
