"""Writes requirements/lock/*.txt, the lock files every virtual environment is installed from (`make lock`).

    python scripts/lock_requirements.py UV

One lock per environment, compiled by uv from the hand-edited inputs in requirements/ (`uv pip compile --universal
--generate-hashes`: exact versions and the sha256 of every file of every platform, so macOS, Linux x86_64 and
aarch64 install the same versions and nothing unverified). The make targets install with `--require-hashes` and
`--no-deps`: what is installed is exactly the lock.

.venv-emulator and .venv-dev extend .venv (scripts/extend-venv), so their locks hold only what they add: the stack
(venv.txt + emulator.txt + dev.txt, with constraints.txt) is resolved once, and each layer's lock is its closure minus
the closures of the layers it extends, at the same versions. The tool venvs (.venv-sam, .venv-checkov, .venv-aws)
resolve alone: each tool pins its own dependencies. uv itself is pinned with its hashes in requirements/lock/uv.txt.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REQ = Path(__file__).resolve().parents[1] / "requirements"
LOCK = REQ / "lock"
# The oldest Python the environments support (scripts/find-python); 3.13 is what ships.
PYTHON_VERSION = "3.12"
# (lock, inputs): the stack's layers in the order they extend each other.
STACK = [("venv", ["venv.txt"]), ("emulator", ["emulator.txt"]), ("dev", ["dev.txt"])]
TOOLS = [("sam", "sam.txt"), ("checkov", "checkov.txt"), ("aws", "aws.txt"), ("uv", "uv.txt")]


def compile_lock(uv: str, inputs: list[str], out: Path, constraints: list[Path]) -> None:
    argv = [uv, "pip", "compile", "--quiet", "--universal", "--python-version", PYTHON_VERSION, "--generate-hashes",
            "--custom-compile-command", "make lock", "--output-file", str(out)]  # fmt: skip
    for path in constraints:
        argv += ["--constraint", str(path)]
    subprocess.run([*argv, *inputs], cwd=REQ, check=True, timeout=600)


def blocks(text: str) -> dict[str, str]:
    """The lock's requirements (`name==version ; marker` -> its lines with hashes and annotations)."""
    out: dict[str, list[str]] = {}
    key = ""
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            key = re.sub(r"\s*\\$", "", line).strip().lower().replace("_", "-")
            out[key] = []
        if key:
            out[key].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def header(name: str, inputs: list[str], note: str) -> str:
    return (
        f"# The lock of {name} (written by `make lock`, scripts/lock_requirements.py: do not edit; edit "
        f"{', '.join('requirements/' + i for i in inputs)} and run `make lock`).\n# {note}\n"
    )


def main() -> int:
    uv = sys.argv[1]
    LOCK.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        closures: list[dict[str, str]] = []
        inputs: list[str] = []
        full = Path(tmp) / "stack.txt"
        compile_lock(uv, [i for _, layer in STACK for i in layer], full, [REQ / "constraints.txt"])
        for name, layer in STACK:
            inputs += layer
            out = Path(tmp) / f"{name}.txt"
            compile_lock(uv, inputs, out, [REQ / "constraints.txt", full])
            closures.append(blocks(out.read_text()))
        for index, (name, layer) in enumerate(STACK):
            below = set().union(*(c.keys() for c in closures[:index]))
            own = {k: v for k, v in closures[index].items() if k not in below}
            extends = [f".venv-{n}" if n != "venv" else ".venv" for n, _ in STACK[:index]]
            note = f"Only what it adds to {' and '.join(extends)}, which it extends." if extends else "The base."
            text = header(f".venv-{name}" if name != "venv" else ".venv", layer, note)
            (LOCK / f"{name}.txt").write_text(text + "".join(v + "\n" for _, v in sorted(own.items())))
    for name, source in TOOLS:
        out = LOCK / f"{name}.txt"
        compile_lock(uv, [source], out, [])
        label = ".venv-uv (the installer)" if name == "uv" else f".venv-{name}"
        out.write_text(header(label, [source], "Resolved alone: the tool pins its own dependencies.") + out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
