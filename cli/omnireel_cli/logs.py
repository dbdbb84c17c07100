"""``omnireel logs [SOURCE] [--job ID] [-f]``: the local stack's logs, one line each with its source and job.

Sources (files under ``<home>/logs/``): a Lambda function (``generate_image``, its logical id or physical name:
``lambda-<name>.log``, written by the warm workers with the request and job id on every line), ``lambda`` (all
functions), ``stack`` (the supervisor: moto, the front door, the SageMaker hosting shim, schedules, hot reload),
``emulator`` (all container emulators) or ``emulator-<model>``, ``relay``. Default: all of them.

Each printed line is ``<source> <job id> <line>``: the Lambda lines carry their job; for the other sources the job
is the one the line names (a job id, or a Lambda request id of a known job), else ``-`` (start-up, schedules, TTS
sessions, which belong to no job). ``--job`` keeps one job's lines; ``-f`` follows the files as they grow.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError
from .target import Target

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_JOB_IN_LINE = re.compile(rf"(?:jobs/|job[ _=:]+|\"job_id\":\s*\"|inferenceId[\"=: ]+|InferenceId[=: ]+)({UUID})")
_REQUEST_IN_LINE = re.compile(rf"request ({UUID})")
_LAMBDA_LINE = re.compile(r"^(\S+)\t(\S+)\tjob=(\S+)\t(.*)$")
FOLLOW_POLL_S = 0.3


@dataclass
class Source:
    name: str  # what is printed: a function's folder name, stack, relay, emulator-<model>
    path: Path
    offset: int = 0
    partial: bytes = b""
    lambda_log: bool = False


@dataclass
class Correlation:
    """Lambda request id -> job id, learned from the Lambda logs, to give stack.log lines their job."""

    jobs: dict[str, str] = field(default_factory=dict)


def sources(target: Target, wanted: str | None) -> list[Source]:
    logs = Path(target.state.get("logs") or "")
    if not logs.is_dir():
        raise UsageError(f"no log folder {logs}: is the local stack running?")
    functions = (target.state.get("provisioned") or {}).get("functions") or {}
    lambdas = []
    aliases: dict[str, str] = {}
    for physical, spec in sorted(functions.items()):
        folder = Path(spec.get("code_dir", physical)).name
        lambdas.append(Source(folder, logs / f"lambda-{physical}.log", lambda_log=True))
        for alias in (physical, spec.get("logical_id"), folder):
            if alias:
                aliases[alias] = folder
    emulators = [Source(_emulator_name(p, target), p) for p in sorted(logs.glob("emulator-*.log"))]
    everything = [Source("stack", logs / "stack.log"), *lambdas, *emulators, Source("relay", logs / "relay.log")]
    if wanted is None:
        return everything
    if wanted == "lambda":
        return lambdas
    if wanted == "emulator":
        return emulators
    if wanted in aliases:
        return [s for s in lambdas if s.name == aliases[wanted]]
    chosen = [s for s in everything if s.name == wanted]
    if not chosen:
        names = [
            "stack",
            "lambda",
            "emulator",
            "relay",
            *sorted({s.name for s in lambdas}),
            *(s.name for s in emulators),
        ]
        raise UsageError(f"no logs named {wanted!r}; choose one of: {', '.join(names)}")
    return chosen


def _emulator_name(path: Path, target: Target) -> str:
    model = path.stem.removeprefix("emulator-").removeprefix(f"{target.state.get('stack_name', '')}-")
    return "emulator-" + re.sub(r"(?<!^)(?=[A-Z])", "-", model.removesuffix("Model")).lower()


def annotate(source: Source, line: str, correlation: Correlation) -> tuple[str, str]:
    """(job id or '-', the line to show) for one raw log line."""
    if source.lambda_log:
        match = _LAMBDA_LINE.match(line)
        if match:
            stamp, request, job, text = match.groups()
            if job != "-" and request not in ("-", "init"):
                correlation.jobs[request] = job
            return job, f"{stamp} {request} {text}"
        return "-", line
    found = _JOB_IN_LINE.search(line)
    if found:
        return found[1], line
    request = _REQUEST_IN_LINE.search(line)
    if request and request[1] in correlation.jobs:
        return correlation.jobs[request[1]], line
    return "-", line


def read_new(source: Source) -> Iterator[str]:
    try:
        with open(source.path, "rb") as handle:
            handle.seek(source.offset)
            data = handle.read()
    except FileNotFoundError:
        return
    source.offset += len(data)
    data = source.partial + data
    lines = data.split(b"\n")
    source.partial = lines.pop()  # an unfinished last line waits for its end
    for raw in lines:
        line = raw.decode(errors="replace").rstrip("\r")
        if line.strip():  # a blank line carries nothing, and would print as a row without its LINE column
            yield line


def show(target: Target, wanted: str | None, job: str | None, follow: bool, timeout: float | None,
         tail: int | None = None, write: Callable[[str], None] = print) -> int:  # fmt: skip
    """Print the chosen logs (the last ``tail`` lines of each), then with ``follow`` what they append."""
    chosen = sources(target, wanted)
    order = sorted(chosen, key=lambda s: not s.lambda_log)  # when following: Lambda lines (request -> job) first
    correlation = Correlation()
    width = max(len(s.name) for s in chosen)
    shown = 0

    def lines_of(source: Source) -> list[str]:
        out = []
        for line in read_new(source):
            line_job, text = annotate(source, line, correlation)
            if job is None or job in line_job.split(","):
                out.append(f"{source.name:<{width}} {line_job:<36} {text}")
        return out

    if any(not s.lambda_log for s in chosen):  # learn the Lambda request ids first: they give stack lines their job
        for source in sources(target, "lambda"):
            for line in read_new(source):
                annotate(source, line, correlation)
    for source in chosen:
        lines = lines_of(source)
        # --tail 0: none of the old lines (lines[-0:] would be all of them: a follower that wanted only new lines
        # got the whole replayed log first, and one whose stdout was not read yet blocked on the full pipe).
        for line in lines if tail is None else lines[max(0, len(lines) - tail) :]:
            write(line)
            shown += 1
    if not follow:
        return shown
    until = f" for {timeout:g} s" if timeout else " (Ctrl-C to stop)"
    print(f"following {len(chosen)} log file(s){until} ...", file=sys.stderr, flush=True)
    deadline = time.monotonic() + timeout if timeout else None
    with contextlib.suppress(KeyboardInterrupt):
        while deadline is None or time.monotonic() < deadline:
            for source in order:
                for line in lines_of(source):
                    write(line)
                    shown += 1
            sys.stdout.flush()
            time.sleep(FOLLOW_POLL_S)  # polling the files for growth, as tail -f does (not test synchronisation)
    return shown
