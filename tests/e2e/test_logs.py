"""`omnireel logs` (the job id on every line, -f) and hot reload, through the CLI against the local stack."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time

from tests.e2e.helpers import LineReader
from tests.support.stack import ROOT, LocalStack, cli_command

UUID_LEN = 36


def _columns(line: str) -> tuple[str, str, str]:
    source, job, text = line.split(maxsplit=2)
    return source, job, text


def _job(stack: LocalStack) -> str:
    result = stack.cli("submit", "a lighthouse keeper's log", "--frames", "5", "--wait", "--json", "--timeout", "120",
                       timeout=180)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["job_id"]


def test_logs_put_the_job_id_on_every_line(stack: LocalStack) -> None:
    job = _job(stack)
    mine = stack.cli("logs", "generate_image", "--job", job, check=True).stdout.splitlines()
    texts = [_columns(line)[2] for line in mine]
    assert all(_columns(line)[:2] == ("generate_image", job) for line in mine), mine
    assert any("START RequestId" in t for t in texts) and any("REPORT RequestId" in t for t in texts)

    everything = stack.cli("logs", check=True).stdout.splitlines()
    assert everything
    for line in everything:
        _, line_job, _ = _columns(line)
        assert line_job == "-" or len(line_job.split(",")[0]) == UUID_LEN, line
    sources = {_columns(line)[0] for line in stack.cli("logs", "--job", job, check=True).stdout.splitlines()}
    # The job's own lines: the API call, each step function of a success (GenerateImage, InvokeVideo queues the video,
    # AsyncResult publishes the terminal event), and the supervisor's lines about them.
    assert {"api", "generate_image", "invoke_video", "async_result", "stack"} <= sources, sources
    assert stack.cli("logs", "nope").returncode == 2


def test_logs_follow_shows_new_lines(stack: LocalStack) -> None:
    follower = subprocess.Popen(
        [*cli_command(), "logs", "async_result", "-f", "--tail", "0", "--timeout", "120"],
        env=stack.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    try:
        assert follower.stderr is not None and follower.stdout is not None
        # bounded: a follower that never gets there (e.g. blocked on a full stdout pipe) fails here, not at the timeout
        assert "following 1 log file(s) for 120 s" in LineReader(follower, "stderr").next_line(timeout=60)
        threading.Thread(target=lambda: [lines.put(line) for line in follower.stdout], daemon=True).start()
        job = _job(stack)
        deadline = time.monotonic() + 60
        seen = []
        while time.monotonic() < deadline and not any("REPORT RequestId" in s and job in s for s in seen):
            try:
                seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                break
    finally:
        follower.terminate()
        follower.wait(timeout=10)
    assert any(_columns(s)[1] == job and "REPORT RequestId" in s for s in seen), seen


def test_an_edited_function_is_reloaded_on_its_next_invocation(stack: LocalStack) -> None:
    job = _job(stack)
    handler = ROOT / "functions" / "publish_event" / "handler.py"
    event = str(ROOT / "events" / "publish_event_succeeded.json")
    # A success no longer runs publish_event (async_result publishes): warm a worker first, so the edit has one to
    # retire whichever tests ran before on this stack.
    warm = stack.cli("invoke", "publish_event", "--event", event, "--job", job)
    assert warm.returncode == 0, warm.stderr
    stamp = time.time_ns()
    os.utime(handler, ns=(stamp, stamp))  # an edit, as an editor's save makes it (content unchanged: shared file)
    result = stack.cli("invoke", "publish_event", "--event", event, "--job", job)
    assert result.returncode == 0, result.stderr
    stack_lines = stack.cli("logs", "stack", check=True).stdout
    assert f"code changed ({handler})" in stack_lines
    after = stack_lines[stack_lines.rindex(f"code changed ({handler})") :]
    assert "PublishEventFunction: cold start" in after  # the next invocation ran in a fresh worker
