"""The same Python work on each interpreter of the machine, side by side in one run: how much of `make test`'s CPU
the interpreter's build decides.

    python3 bench/interpreter.py [--python PATH ...] [--rounds 5] [--no-moto] [--out docs/benchmarks/interpreter.md|-]

`make test` is bound by CPU on 2 cores (docs/benchmarks.md, issue 35), and nearly all of it is Python: the local AWS
(moto), the Lambda workers (botocore), the test processes. How a CPython is built changes that CPU by itself: without
profile-guided optimisation and link-time optimisation, and with the interpreter calling into a shared libpython
built without ``-fno-semantic-interposition`` (pyenv's default build: ``--enable-shared``, no
``--enable-optimizations``), the same bytecode runs slower. This bench measures it instead of guessing.

Each interpreter (default: the project's, ``/usr/bin/python3`` and every pyenv version >= 3.10 found) runs, in a
child process of its own, the same workloads, alternating interpreters round after round so that a change in the
machine's speed hits each alike; the figure is the median of the rounds' CPU seconds (``time.process_time`` in the
child: CPU, not wall time). Workloads: ``json+sha256`` (20,000 JSON round trips and SHA-256 digests: serialisation
and C calls), ``loop+dicts`` (pure-Python arithmetic, dicts and lists), and ``moto DynamoDB`` (600 GetItem/UpdateItem
pairs against moto in-process, the local AWS's commonest work; in a throw-away venv per interpreter with moto, boto3
and botocore at the versions of requirements/constraints.txt, made with the project's uv; ``--no-moto`` skips it).
Also reported per interpreter: its version and whether it runs from a shared libpython (mapped into the process).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import emit, machine, table, today

REPO = Path(__file__).resolve().parents[1]
UV = REPO / ".venv-uv" / "bin" / "uv"
MOTO_PACKAGES = ("moto", "boto3", "botocore")

CHILD = r"""
import hashlib, json, os, platform, sys, time

def json_sha():
    x = {"a": list(range(200)), "b": "x" * 100}
    for _ in range(20000):
        s = json.dumps(x)
        hashlib.sha256(s.encode()).hexdigest()
        json.loads(s)

def loop_dicts():
    total = 0
    for i in range(1_500_000):
        total += i * i % 7
    table = {}
    for i in range(150_000):
        table[str(i)] = [i, {"a": i}]
    return total, len(table)

def moto_dynamodb():
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    import boto3
    from moto import mock_aws
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        for i in range(50):
            ddb.put_item(TableName="t", Item={"pk": {"S": str(i)}, "n": {"N": "0"}, "m": {"M": {"a": {"S": "x"}}}})
        start = time.process_time()
        for i in range(600):
            key = {"pk": {"S": str(i % 50)}}
            ddb.get_item(TableName="t", Key=key, ConsistentRead=True)
            ddb.update_item(TableName="t", Key=key, UpdateExpression="SET n = n + :one, s = if_not_exists(s, :z)",
                            ConditionExpression="attribute_exists(pk)", ReturnValues="ALL_NEW",
                            ExpressionAttributeValues={":one": {"N": "1"}, ":z": {"S": "q"}})
        return time.process_time() - start

which = sys.argv[1]
if which == "info":
    maps = open("/proc/self/maps").read() if os.path.exists("/proc/self/maps") else ""
    print(json.dumps({"version": platform.python_version(), "shared_libpython": "libpython" in maps}))
elif which == "moto DynamoDB":
    print(json.dumps({"cpu": moto_dynamodb()}))
else:
    start = time.process_time()
    {"json+sha256": json_sha, "loop+dicts": loop_dicts}[which]()
    print(json.dumps({"cpu": time.process_time() - start}))
"""
WORKLOADS = ("json+sha256", "loop+dicts")


def default_interpreters() -> list[str]:
    found = [str(REPO / ".venv" / "bin" / "python"), "/usr/bin/python3"]
    found += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.1[0-9]*/bin/python3"))
    return found


def run_child(python: str, which: str) -> dict:
    done = subprocess.run([python, "-c", CHILD, which], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{python} {which}: {done.stderr[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def pinned(package: str) -> str:
    for line in (REPO / "requirements" / "constraints.txt").read_text().splitlines():
        if re.match(rf"^{re.escape(package)}==", line, re.I):
            return line.split("#")[0].strip()
    raise SystemExit(f"{package} is not pinned in requirements/constraints.txt")


def moto_venv(python: str, root: Path) -> str | None:
    """A venv of ``python`` with moto, boto3 and botocore as pinned; None (reported) if it cannot be made."""
    target = root / re.sub(r"[^A-Za-z0-9]+", "_", python)
    made = subprocess.run([str(UV), "venv", "-q", "--python", python, str(target)], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    if made.returncode == 0:
        spec = [pinned(p) for p in MOTO_PACKAGES]
        spec[0] = spec[0].replace("moto==", "moto[dynamodb]==")
        made = subprocess.run([str(UV), "pip", "install", "-q", "--python", str(target / "bin" / "python"), *spec],
                              capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    if made.returncode != 0:
        print(f"no moto venv for {python}: {made.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return str(target / "bin" / "python")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", help="an interpreter to measure (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-moto", action="store_true", help="skip the moto workload (no venvs made)")
    parser.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "interpreter.md"))
    args = parser.parse_args()

    seen: dict[str, str] = {}  # real path -> as given
    for python in args.python or default_interpreters():
        if Path(python).exists() and os.path.realpath(python) not in seen:
            seen[os.path.realpath(python)] = python
    pythons = list(seen.values())
    info = {p: run_child(p, "info") for p in pythons}
    pythons = [p for p in pythons if tuple(map(int, info[p]["version"].split(".")[:2])) >= (3, 10)]
    reference = pythons[0]

    with tempfile.TemporaryDirectory(prefix="interpreter-bench-") as tmp:
        runners = {p: {w: p for w in WORKLOADS} for p in pythons}
        workloads = list(WORKLOADS)
        if not args.no_moto:
            workloads.append("moto DynamoDB")
            for p in pythons:
                venv = moto_venv(p, Path(tmp))
                if venv:
                    runners[p]["moto DynamoDB"] = venv
        cpu: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):  # interleaved: each round runs every interpreter once per workload
            for w in workloads:
                for p in pythons:
                    if w in runners[p]:
                        cpu.setdefault((p, w), []).append(run_child(runners[p][w], w)["cpu"])

    def cell(p: str, w: str) -> str:
        if (p, w) not in cpu:
            return "-"
        med = statistics.median(cpu[(p, w)])
        ref = cpu.get((reference, w))
        return f"{med:.3f} s" + ("" if p == reference or not ref else f" ({med / statistics.median(ref):.2f}x)")

    rows = [[f"`{p}`", info[p]["version"], "yes" if info[p]["shared_libpython"] else "no",
             *(cell(p, w) for w in workloads)] for p in pythons]  # fmt: skip
    text = (
        f"Measured {today()} on {machine()}: median CPU seconds of {args.rounds} interleaved rounds; in brackets, "
        f"the ratio to the project's interpreter (first row).\n\n"
        + table(["interpreter", "version", "shared libpython", *workloads], rows)
    )
    emit("interpreter", text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
