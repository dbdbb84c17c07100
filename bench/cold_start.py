"""Cold-start proxy per Lambda function: module import time of functions/<name>/handler.py, and package size.

    .venv/bin/python bench/cold_start.py [--quick] [--runs 7] [--nopyc] [--instructions]
        [--out docs/benchmarks/cold-start.md|-]

The yardstick is measured side by side in the same run: the smallest useful Lambda, ``import boto3`` plus creating one
client (``boto3.client("s3")``), in the same kind of fresh interpreter with the same layer. Each function's import is
reported as a ratio to it (target: <= 1.3x), so a slower or busier machine moves both alike. Each child reports its
wall time (the headline: Lambda's init is wall time) and its CPU time (less sensitive to other load on the machine).

No tracing SDK: the functions rely on Lambda active tracing (docs/decisions.md, 2026-12-03, "Tracing after the X-Ray
SDK"; until then a second condition measured the X-Ray SDK on: git history).

Each run is a fresh interpreter (.venv's Python 3.13) whose sys.path is the function's code directory and the
layer's package (layers/omnireel) plus the layer's third-party packages (symlinks into .venv's site-packages: the same
pinned versions). It times ``import handler`` - the handler's module-level work included (settings from env,
Powertools Logger/Metrics, the stores and the clients they create; creating a client makes no call). The
environment mimics Lambda: LAMBDA_TASK_ROOT and AWS_LAMBDA_FUNCTION_NAME are set, the function's environment comes
from template.yaml (parameter defaults, placeholders for resource names), and AWS_ENDPOINT_URL /
AWS_XRAY_DAEMON_ADDRESS point at 127.0.0.1:9, so nothing reaches a network.

Two bytecode conditions (the second only with ``--nopyc``):
* ``with .pyc`` - bytecode present and valid: what we ship (layers/omnireel/Makefile runs compileall).
* ``no .pyc`` - a layer built with SAM's ``BuildMethod: python3.13`` (no ``__pycache__``; /opt is read-only, so
  every cold start compiles every module from source; simulated with an empty PYTHONPYCACHEPREFIX and
  PYTHONDONTWRITEBYTECODE=1);

Package size: the zip (deflate) of .aws-sam/build/DomainLayer and of each function's build directory, as
``sam build`` produced them (``make build`` is run if they are missing).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import emit, machine, quantile, today  # noqa: E402
from omnireel_template import function_folders, offline_lambda_environment  # noqa: E402

TARGET_RATIO = 1.3
BASELINE = "(baseline) boto3 + one client"
BUILD = REPO / ".aws-sam" / "build"


def _timed(body: str) -> str:
    """Child code: run ``body``, print its wall and CPU milliseconds (interpreter start-up excluded)."""
    report = "print(f'IMPORT_MS {(time.perf_counter() - t) * 1e3:.3f} CPU_MS {(time.process_time() - c) * 1e3:.3f}')"
    return f"import time\nt = time.perf_counter()\nc = time.process_time()\n{body}\n{report}\n"


# Measured in the child: only the import of the handler module.
CHILD = _timed("import handler")
# The yardstick: the least a Python Lambda that calls AWS does at init (no network: the client makes no call).
_BASE = "import boto3\nboto3.client('s3')\n"
BASELINE_CHILD = _timed(_BASE)
_POWERTOOLS = "from aws_lambda_powertools import Logger, Metrics\nLogger()\nMetrics()\n"
# Probes that split the shared cost (each measured paired with the baseline, like a function): botocore alone (how the
# functions create their clients: omnireel.aws.clients), Powertools' Logger + Metrics, msgspec (the records' and
# events' library: its import and a struct converted, as a function does with its settings), a DynamoDB Table
# resource (what the stores used before the low-level client), and more clients.
PROBES = {
    "(probe) botocore + one client": _timed(
        "import botocore.session\nbotocore.session.get_session().create_client('s3')"
    ),
    "(probe) baseline + Logger, Metrics": _timed(_BASE + _POWERTOOLS),
    "(probe) baseline + msgspec (import and one struct converted)": _timed(
        _BASE + "import msgspec\nclass Probe(msgspec.Struct):\n    x: int\nmsgspec.convert({'x': 1}, Probe)"
    ),
    "(probe) baseline + a DynamoDB Table resource": _timed(_BASE + "boto3.resource('dynamodb').Table('t')"),
    "(probe) baseline + 3 clients (sns, events, stepfunctions)": _timed(
        _BASE + "for name in ('sns', 'events', 'stepfunctions'):\n    boto3.client(name)"
    ),
}


def functions() -> list[str]:
    return function_folders()


def layer_site(target: Path) -> Path:
    """A site directory holding exactly the layer's packages: symlinks into .venv's site-packages.

    The built layer has arm64 binaries, so it cannot be imported here; .venv has the same pinned versions for
    x86_64 but also more packages (awscrt, for example, which botocore imports when present and the layer lacks).
    """
    venv_site = Path(sysconfig.get_paths()["purelib"])
    target.mkdir(parents=True, exist_ok=True)
    for entry in (BUILD / "DomainLayer" / "python").iterdir():
        if entry.name in {"omnireel", "requirements.txt"}:
            continue
        # Extension modules carry the platform in their name (aarch64 in the layer, x86_64 here): match by module.
        sources = [venv_site / entry.name] if (venv_site / entry.name).exists() else []
        if not sources and entry.suffix == ".so":
            sources = list(venv_site.glob(entry.name.split(".")[0] + ".*.so"))
        for source in sources:
            if not (target / source.name).exists():
                (target / source.name).symlink_to(source)
    return target


SITE: Path | None = None


@dataclass(frozen=True)
class Sample:
    wall_ms: float
    cpu_ms: float
    stderr: str


def child_env(name: str, pycache_prefix: str | None) -> dict[str, str]:
    assert SITE is not None
    site = str(SITE)
    env = {
        **offline_lambda_environment(name),
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "PYTHONPATH": os.pathsep.join([str(REPO / "functions" / name), str(REPO / "layers" / "omnireel"), site]),
        "PYTHONHASHSEED": "0",
    }
    if pycache_prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = pycache_prefix
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def import_ms(name: str, pycache_prefix: str | None, importtime: bool = False) -> Sample:
    """One fresh interpreter: the import of ``name``'s handler (or, for BASELINE, boto3 and one client)."""
    # -S: no site-packages (only the layer's packages, via PYTHONPATH); -s: no user site; a neutral cwd.
    code = BASELINE_CHILD if name == BASELINE else PROBES.get(name, CHILD)
    argv = [sys.executable, "-S", "-s", *(["-X", "importtime"] if importtime else []), "-c", code]
    # The baseline and probes borrow api's paths and environment; they import nothing from the function directory.
    proc = subprocess.run(
        argv,
        env=child_env("api" if name == BASELINE or name in PROBES else name, pycache_prefix),
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r"IMPORT_MS ([\d.]+) CPU_MS ([\d.]+)", proc.stdout)
    if proc.returncode or not found:
        raise RuntimeError(f"{name}: import failed\n{proc.stderr[-2000:]}")
    return Sample(float(found.group(1)), float(found.group(2)), proc.stderr)


def instructions(name: str) -> int:
    """User-space instructions of one fresh interpreter running ``name``'s child code (valgrind's cachegrind, no cache
    simulation): deterministic, so other load on the machine cannot move it. Interpreter start-up is included; the
    caller subtracts an empty interpreter's count."""
    code = {"(empty interpreter)": "pass", BASELINE: BASELINE_CHILD}.get(name) or PROBES.get(name, CHILD)
    env = child_env("api" if name.startswith("(") else name, None)
    with tempfile.TemporaryDirectory(prefix="omnireel-cachegrind-") as tmp:
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={tmp}/out"]
        proc = subprocess.run(
            [*argv, sys.executable, "-S", "-s", "-c", code], env=env, cwd=tmp, capture_output=True, text=True,
            timeout=900, check=False,
        )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode or not found:
        raise RuntimeError(f"{name}: valgrind failed\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def instruction_table(names: list[str]) -> str:
    """Instructions per function and probe as a ratio to the baseline's."""
    empty = instructions("(empty interpreter)")
    base = instructions(BASELINE) - empty
    rows = [f"| {BASELINE} | {base / 1e6:,.0f} | 1.00 |"]
    for name in [*PROBES, *names]:
        count = instructions(name) - empty
        rows.append(f"| {name} | {count / 1e6:,.0f} | **{count / base:.2f}** |")
    return "| function or probe | M instructions | / baseline |\n|---|---|---|\n" + "\n".join(rows)


def heavy_imports(stderr: str, top: int = 6) -> list[tuple[str, float]]:
    """Self time (ms) per top-level package, from ``-X importtime`` output."""
    by_package: dict[str, float] = defaultdict(float)
    for line in stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if found:
            by_package[found.group(4).split(".")[0]] += int(found.group(1)) / 1e3
    return sorted(by_package.items(), key=lambda kv: -kv[1])[:top]


def ensure_build() -> str:
    if (BUILD / "DomainLayer" / "python").is_dir():
        return "existing `.aws-sam/build`"
    started = time.perf_counter()
    subprocess.run(["make", "build"], cwd=REPO, check=True, timeout=600)
    return f"`make build` run by the bench ({time.perf_counter() - started:.0f} s)"


def zipped_size(root: Path) -> tuple[int, int, int]:
    """(zip bytes, unzipped bytes, files) of a directory, deflate level 6 like the SAM CLI."""
    buffer = io.BytesIO()
    raw = files = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(root).as_posix())
                raw += path.stat().st_size
                files += 1
    return len(buffer.getvalue()), raw, files


def build_dir(name: str) -> Path | None:
    camel = "".join(part.title() for part in name.split("_")) + "Function"
    path = BUILD / camel
    return path if path.is_dir() else None


INSTRUCTIONS_NOTE = (
    "Instructions (`--instructions`): user-space instructions of each import (valgrind cachegrind; an empty "
    "interpreter's count subtracted), one run each. Deterministic, so the machine's load cannot move them; they leave "
    "out system calls (file look-ups and reads), so they understate import-heavy costs a little against wall time."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 runs per function and condition; no write unless --out")
    parser.add_argument("--runs", type=int, default=None, help="fresh interpreters per function and condition (7)")
    parser.add_argument("--nopyc", action="store_true", help="also measure without bytecode (slower)")
    parser.add_argument("--out", default=None, help="file whose 'cold_start' section is replaced; '-' prints")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions with valgrind (load-independent; slow)"
    )
    args = parser.parse_args()
    if args.instructions and not shutil.which("valgrind"):
        parser.error("--instructions needs valgrind on PATH (apt-get install valgrind)")
    runs = args.runs or (3 if args.quick else 7)
    out = (
        args.out
        if args.out is not None
        else ("-" if args.quick else str(REPO / "docs" / "benchmarks" / "cold-start.md"))
    )
    started = time.perf_counter()
    build_note = ensure_build()

    names = functions()
    layer_zip, layer_raw, layer_files = zipped_size(BUILD / "DomainLayer")
    layer_pyc = sum(1 for _ in (BUILD / "DomainLayer").rglob("*.pyc"))
    # results[name][condition]: wall ms per run; cpu[name][condition]: CPU ms per run. Conditions: "off" (with .pyc:
    # the name is from when an X-Ray SDK condition existed), "nopyc" (no bytecode), and each one's paired baseline
    # runs "base_off", "base_nopyc".
    results: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}
    breakdown: dict[str, list[tuple[str, float]]] = {}
    global SITE
    with (
        tempfile.TemporaryDirectory(prefix="omnireel-nopyc-") as empty,
        tempfile.TemporaryDirectory(prefix="omnireel-layer-") as site_dir,
    ):
        SITE = layer_site(Path(site_dir) / "python")
        for name in [BASELINE, *PROBES, *names]:
            import_ms(name, None)  # populate the bytecode cache

        def record(name: str, condition: str, sample: Sample) -> None:
            results[name].setdefault(condition, []).append(sample.wall_ms)
            cpu[name].setdefault(condition, []).append(sample.cpu_ms)

        for name in [*PROBES, *names]:
            results[name], cpu[name] = {}, {}
            # Side by side: each run is paired with a baseline run just before it, and the conditions alternate, so
            # drift and other load on the machine hit the function and its yardstick alike.
            for _ in range(runs):
                record(name, "base_off", import_ms(BASELINE, None))
                record(name, "off", import_ms(name, None))
                if args.nopyc and name in names:
                    record(name, "base_nopyc", import_ms(BASELINE, empty))
                    record(name, "nopyc", import_ms(name, empty))
            breakdown[name] = heavy_imports(import_ms(name, None, importtime=True).stderr)
        breakdown[BASELINE] = heavy_imports(import_ms(BASELINE, None, importtime=True).stderr)
        counted = instruction_table(names) if args.instructions else ""

    def med(values: list[float] | None) -> str:
        return f"{statistics.median(values):.0f}" if values else "-"

    def ratio(values: list[float] | None, base: list[float] | None) -> float | None:
        return statistics.median(values) / statistics.median(base) if values and base else None

    def fmt(value: float | None, bold: bool = False) -> str:
        if value is None:
            return "-"
        return f"**{value:.2f}**" if bold else f"{value:.2f}"

    rows, heavy_rows, probe_rows = [], [], []
    base_all = [v for name in [*PROBES, *names] for v in results[name]["base_off"]]
    base_cpu_all = [v for name in [*PROBES, *names] for v in cpu[name]["base_off"]]
    for name in PROBES:
        r, c = results[name], cpu[name]
        extra = statistics.median(r["off"]) - statistics.median(r["base_off"])
        probe_rows.append(
            f"| {name} | {med(r['base_off'])} | {med(r['off'])} | {fmt(ratio(r['off'], r['base_off']))} | "
            f"{extra:+.0f} | {fmt(ratio(c['off'], c['base_off']))} |"
        )
    rows.append(
        f"| {BASELINE} | {med(base_all)} | {med(base_all)} | {quantile(base_all, 0.9):.0f} | 1.00 | | "
        f"{med(base_cpu_all)} ms |"
    )
    heavy_rows.append(f"| {BASELINE} | " + ", ".join(f"{pkg} {ms:.0f}" for pkg, ms in breakdown[BASELINE]) + " |")
    ratios: dict[str, float] = {}
    for name in names:
        r, c = results[name], cpu[name]
        ratios[name] = ratio(r["off"], r["base_off"]) or 0.0
        fn_dir = build_dir(name)
        fn_zip = zipped_size(fn_dir)[0] if fn_dir else zipped_size(REPO / "functions" / name)[0]
        ok = "met" if ratios[name] <= TARGET_RATIO else "**missed**"
        rows.append(
            f"| {name} | {med(r['base_off'])} | {med(r['off'])} | {quantile(r['off'], 0.9):.0f} | "
            f"{fmt(ratios[name], bold=True)} | {ok} | {fmt(ratio(c['off'], c['base_off']))} | "
            f"{fmt(ratio(r.get('nopyc'), r.get('base_nopyc')))} |"
        )
        heavy_rows.append(f"| {name} | " + ", ".join(f"{pkg} {ms:.0f}" for pkg, ms in breakdown[name]) + " |")
        rows[-1] += f" {fn_zip:,} | {(layer_zip + fn_zip) / 1e6:.1f} MB |"
    rows[0] += " | | |"  # no .pyc, function zip, layer+function zip
    met = sum(1 for value in ratios.values() if value <= TARGET_RATIO)
    load = os.getloadavg()
    flags = "".join(f" --{flag}" for flag in ("quick", "nopyc", "instructions") if getattr(args, flag))
    command = f".venv/bin/python bench/cold_start.py{flags}"
    text = f"""## Cold-start proxy (`bench/cold_start.py`)

Command: `{command}` ({runs} fresh interpreters per function and condition, each right after a baseline run).
Machine: {machine()}. Date: {today()}. Run time: {time.perf_counter() - started:.0f} s. Build: {build_note}.
Load average at the end: {load[0]:.1f} / {load[1]:.1f} (1 / 5 min; on a busy machine read the CPU-time ratios too).

Import time of `functions/<name>/handler.py` (module-level work included: settings, Logger, Metrics, the
stores and the clients they create; interpreter start-up excluded) next to the yardstick measured in the same run,
`import boto3` + `boto3.client("s3")` (the least a Python Lambda that calls AWS does at init), as a ratio of medians.
Lambda-like environment, nothing reaches a network. No tracing SDK is loaded (Lambda active tracing records each
invocation; docs/decisions.md, "Tracing after the X-Ray SDK"). Bytecode present is what we ship:
`layers/omnireel/Makefile` (`BuildMethod: makefile`) precompiles the layer ({layer_files:,} files, {layer_pyc}
`.pyc`); "no .pyc" (only with `--nopyc`) is the code as SAM's `BuildMethod: python3.13` would ship it (/opt is
read-only: every cold start would compile every module).

**Result: {met} of {len(names)} functions within {TARGET_RATIO}x the baseline.**

| function | baseline p50 ms (its paired runs) | import p50 ms | p90 | / baseline | target <= {TARGET_RATIO}x \
| CPU time / baseline | no .pyc / baseline | function zip bytes | layer+function zip |
|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Layer `.aws-sam/build/DomainLayer` (arm64 wheels): {layer_zip / 1e6:.1f} MB zipped, {layer_raw / 1e6:.1f} MB unzipped
(Lambda limits: 50 MB zipped for direct upload, 250 MB unzipped for function + layers).

What the shared pieces cost, each probe paired with the baseline like a function (p50 ms, with .pyc):

| probe | baseline | probe | / baseline | probe - baseline ms | CPU time / baseline |
|---|---|---|---|---|---|
{chr(10).join(probe_rows)}

{INSTRUCTIONS_NOTE + chr(10) + chr(10) + counted + chr(10) + chr(10) if counted else ""}\
Heaviest imports per function (self time in ms by top-level package, `-X importtime`, with .pyc; `handler`
is the module's own top-level work: settings, stores, client creation):

| function | packages |
|---|---|
{chr(10).join(heavy_rows)}

Target: each function's import <= {TARGET_RATIO}x the baseline's, with .pyc. A Lambda at 512 MB gets a fraction
of a vCPU (arm64), so absolute times here are a proxy: confirm with `Init Duration` in the REPORT lines of CloudWatch
Logs after a deploy.
"""
    emit("cold_start", text, out)


if __name__ == "__main__":
    main()
