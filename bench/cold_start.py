"""Cold-start proxy per Lambda function: module import time of functions/<name>/handler.py, and package size.

    .venv/bin/python bench/cold_start.py [--quick] [--runs 7] [--out docs/benchmarks.md|-]

The yardstick is measured side by side in the same run: the smallest useful Lambda, ``import boto3`` plus creating one
client (``boto3.client("s3")``), in the same kind of fresh interpreter with the same layer. Each function's import is
reported as a ratio to it (target: <= 1.3x), so a slower or busier machine moves both alike.

Each run is a fresh interpreter (.venv's Python 3.13) whose sys.path is the function's code directory and the
layer's package (layers/omnireel) plus .venv's site-packages (same pinned versions as the layer). It times
``import handler`` with ``time.perf_counter`` - the handler's module-level work included (settings from env,
Powertools Logger/Tracer/Metrics, stores; boto3 clients are lazy and make no calls). The environment mimics
Lambda: LAMBDA_TASK_ROOT and AWS_LAMBDA_FUNCTION_NAME are set (so Powertools' Tracer is enabled and imports
and patches the X-Ray SDK as it does with ``Tracing: Active``), the function's environment comes from template.yaml
(parameter defaults, placeholders for resource names), and AWS_ENDPOINT_URL / AWS_XRAY_DAEMON_ADDRESS point at
127.0.0.1:9, so nothing reaches a network.

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
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import emit, machine, quantile, today  # noqa: E402
from omnireel_template import (  # noqa: E402
    function_environment,
    function_folder,
    function_folders,
    load_template,
    serverless_functions,
)

TARGET_RATIO = 1.3
BASELINE = "(baseline) boto3 + one client"
BUILD = REPO / ".aws-sam" / "build"
DUMMY_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_SESSION_TOKEN": "bench",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:9",
    "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
    "AWS_EC2_METADATA_DISABLED": "true",
}
# Measured in the child: only the import of the handler module (interpreter start-up excluded).
CHILD = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "import handler\n"
    "print(f'IMPORT_MS {(time.perf_counter() - t) * 1e3:.3f}')\n"
)


def _timed(body: str) -> str:
    report = "print(f'IMPORT_MS {(time.perf_counter() - t) * 1e3:.3f}')"
    return f"import time\nt = time.perf_counter()\n{body}\n{report}\n"


# The yardstick: the least a Python Lambda that calls AWS does at init (no network: the client makes no call).
BASELINE_CHILD = _timed("import boto3\nboto3.client('s3')")
# Probes that split the shared cost (each measured paired with the baseline, like a function): botocore alone (what
# boto3 adds on top), Powertools' Logger + Metrics, and those plus the Tracer as omnireel.observability creates it.
PROBES = {
    "(probe) botocore + one client": _timed(
        "import botocore.session\nbotocore.session.get_session().create_client('s3')"
    ),
    "(probe) baseline + Logger, Metrics": _timed(
        "import boto3\nboto3.client('s3')\nfrom aws_lambda_powertools import Logger, Metrics\nLogger()\nMetrics()"
    ),
    "(probe) baseline + Logger, Metrics, Tracer": _timed(
        "import boto3\nboto3.client('s3')\nfrom aws_lambda_powertools import Logger, Metrics, Tracer\nLogger()\n"
        "Metrics()\nTracer(patch_modules=['botocore'])"
    ),
}


def functions() -> list[str]:
    return function_folders()


def template_environment(name: str) -> dict[str, str]:
    """The function's environment from template.yaml (parameter defaults; other references become placeholders)."""
    template = load_template()
    logical = next(k for k, fn in serverless_functions(template).items() if function_folder(fn) == name)
    return function_environment(template, logical)


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


def child_env(name: str, pycache_prefix: str | None) -> dict[str, str]:
    assert SITE is not None
    site = str(SITE)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        **DUMMY_ENV,
        **template_environment(name),
        "LAMBDA_TASK_ROOT": str(REPO / "functions" / name),
        "AWS_LAMBDA_FUNCTION_NAME": f"omnireel-{name}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "PYTHONPATH": os.pathsep.join([str(REPO / "functions" / name), str(REPO / "layers" / "omnireel"), site]),
        "PYTHONHASHSEED": "0",
    }
    if pycache_prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = pycache_prefix
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def import_ms(name: str, pycache_prefix: str | None, importtime: bool = False) -> tuple[float, str]:
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
    found = re.search(r"IMPORT_MS ([\d.]+)", proc.stdout)
    if proc.returncode or not found:
        raise RuntimeError(f"{name}: import failed\n{proc.stderr[-2000:]}")
    return float(found.group(1)), proc.stderr


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 runs per function and condition; no write unless --out")
    parser.add_argument("--runs", type=int, default=None, help="fresh interpreters per function and condition (7)")
    parser.add_argument("--nopyc", action="store_true", help="also measure without bytecode (doubles the run time)")
    parser.add_argument("--out", default=None, help="file whose 'cold_start' section is replaced; '-' prints")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 7)
    out = args.out if args.out is not None else ("-" if args.quick else str(REPO / "docs" / "benchmarks.md"))
    started = time.perf_counter()
    build_note = ensure_build()

    names = functions()
    layer_zip, layer_raw, layer_files = zipped_size(BUILD / "DomainLayer")
    layer_pyc = sum(1 for _ in (BUILD / "DomainLayer").rglob("*.pyc"))
    results: dict[str, dict[str, list[float]]] = {}
    breakdown: dict[str, list[tuple[str, float]]] = {}
    global SITE
    with (
        tempfile.TemporaryDirectory(prefix="omnireel-nopyc-") as empty,
        tempfile.TemporaryDirectory(prefix="omnireel-layer-") as site_dir,
    ):
        SITE = layer_site(Path(site_dir) / "python")
        for name in [BASELINE, *PROBES, *names]:
            import_ms(name, None)  # populate the bytecode cache for the 'with .pyc' condition
        for name in [*PROBES, *names]:
            results[name] = {"nopyc": [], "pyc": [], "base_nopyc": [], "base_pyc": []}
            # Side by side: each function run is paired with a baseline run just before it, and the conditions
            # alternate, so drift and other load on the machine hit the function and its yardstick alike.
            for _ in range(runs):
                if args.nopyc:
                    results[name]["base_nopyc"].append(import_ms(BASELINE, empty)[0])
                    results[name]["nopyc"].append(import_ms(name, empty)[0])
                results[name]["base_pyc"].append(import_ms(BASELINE, None)[0])
                results[name]["pyc"].append(import_ms(name, None)[0])
            breakdown[name] = heavy_imports(import_ms(name, None, importtime=True)[1])
        breakdown[BASELINE] = heavy_imports(import_ms(BASELINE, None, importtime=True)[1])

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.0f}" if values else "-"

    def ratio_of(values: list[float], base: list[float]) -> str:
        return f"{statistics.median(values) / statistics.median(base):.2f}" if values else "-"

    rows, heavy_rows, probe_rows = [], [], []
    base_pyc_all = [v for name in [*PROBES, *names] for v in results[name]["base_pyc"]]
    base_nopyc_all = [v for name in [*PROBES, *names] for v in results[name]["base_nopyc"]]
    for name in PROBES:
        r = results[name]
        extra = statistics.median(r["pyc"]) - statistics.median(r["base_pyc"])
        probe_rows.append(
            f"| {name} | {med(r['base_pyc'])} | {med(r['pyc'])} | {ratio_of(r['pyc'], r['base_pyc'])} | {extra:+.0f} |"
        )
    rows.append(
        f"| {BASELINE} | {med(base_pyc_all)} | {med(base_pyc_all)} | {quantile(base_pyc_all, 0.9):.0f} | 1.00 | | "
        f"{med(base_nopyc_all)} | | | |"
    )
    heavy_rows.append(f"| {BASELINE} | " + ", ".join(f"{pkg} {ms:.0f}" for pkg, ms in breakdown[BASELINE]) + " |")
    ratios: dict[str, float] = {}
    for name in names:
        r = results[name]
        ratios[name] = statistics.median(r["pyc"]) / statistics.median(r["base_pyc"])
        fn_dir = build_dir(name)
        fn_zip = zipped_size(fn_dir)[0] if fn_dir else zipped_size(REPO / "functions" / name)[0]
        ok = "met" if ratios[name] <= TARGET_RATIO else "**missed**"
        rows.append(
            f"| {name} | {med(r['base_pyc'])} | {med(r['pyc'])} | {quantile(r['pyc'], 0.9):.0f} | "
            f"**{ratios[name]:.2f}** | {ok} | {med(r['nopyc'])} | {ratio_of(r['nopyc'], r['base_nopyc'])} | "
            f"{fn_zip:,} | {(layer_zip + fn_zip) / 1e6:.1f} MB |"
        )
        heavy_rows.append(f"| {name} | " + ", ".join(f"{pkg} {ms:.0f}" for pkg, ms in breakdown[name]) + " |")
    met = sum(1 for ratio in ratios.values() if ratio <= TARGET_RATIO)
    text = f"""## Cold-start proxy (`bench/cold_start.py`)

Command: `.venv/bin/python bench/cold_start.py{" --quick" if args.quick else ""}{" --nopyc" if args.nopyc else ""}`
({runs} fresh interpreters per function and condition, each right after a baseline run in the same condition).
Machine: {machine()}. Date: {today()}. Run time: {time.perf_counter() - started:.0f} s. Build: {build_note}.

Import time of `functions/<name>/handler.py` (module-level work included; interpreter start-up excluded) next to the
yardstick measured in the same run, `import boto3` + `boto3.client("s3")` (the least a Python Lambda that calls AWS
does at init), as a ratio of medians. Lambda-like environment (Tracer enabled, so the X-Ray SDK is imported and
patches botocore), nothing reaches a network.
Bytecode present is what we ship: `layers/omnireel/Makefile` (`BuildMethod: makefile`) precompiles the layer
({layer_files:,} files, {layer_pyc} `.pyc`). "no .pyc" (only with `--nopyc`) is the same code as SAM's
`BuildMethod: python3.13` would ship it: no bytecode, and /opt is read-only, so Python would compile every module at
every cold start.

Result: {met} of {len(names)} functions within {TARGET_RATIO}x the baseline (with .pyc, what we ship).

| function | baseline p50 ms (its paired runs) | import p50 ms | p90 | / baseline | target <= {TARGET_RATIO}x \
| no .pyc p50 ms | / baseline | function zip bytes | layer+function zip |
|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Layer `.aws-sam/build/DomainLayer` (arm64 wheels): {layer_zip / 1e6:.1f} MB zipped, {layer_raw / 1e6:.1f} MB unzipped
(Lambda limits: 50 MB zipped for direct upload, 250 MB unzipped for function + layers).

What the shared pieces cost, each probe paired with the baseline like a function (p50 ms, with .pyc):

| probe | baseline | probe | / baseline | probe - baseline ms |
|---|---|---|---|---|
{chr(10).join(probe_rows)}

Heaviest imports per function (self time in ms by top-level package, `-X importtime`, with .pyc):

| function | packages |
|---|---|
{chr(10).join(heavy_rows)}

Target: each function's import <= {TARGET_RATIO}x the baseline's, with .pyc. A Lambda at 512 MB gets a fraction of a
vCPU (arm64), so absolute times here are a proxy: confirm with `Init Duration` in the REPORT lines of CloudWatch Logs
after a deploy.
"""
    emit("cold_start", text, out)


if __name__ == "__main__":
    main()
