"""Issue 28 item 4: ``omnireel submit --wait`` and ``omnireel batch --wait`` on a pseudo-terminal (a live line redrawn
in place: stages; a batch's bar and rate) and through a pipe (one plain line per change, no control characters)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

from tests.support.stack import ROOT, LocalStack, cli_command

TIMEOUT_S = 180


def _on_a_terminal(stack: LocalStack, *args: str) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; everything it wrote, and its exit code."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([*cli_command(), *args], env={**stack.env, "COLUMNS": "200"}, cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)  # fmt: skip
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process has exited
                break
            if not data:
                break
            chunks.append(data)
        return process.wait(timeout=30), b"".join(chunks).decode(errors="replace")
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()


def test_submit_wait_on_a_terminal_redraws_its_stages(stack: LocalStack) -> None:
    code, out = _on_a_terminal(stack, "submit", "a lighthouse on a terminal", "--steps", "2", "--wait")
    assert code == 0, out
    redraws = re.findall(r"\rjob [0-9a-f]{8}  ([^\r\x1b]*)\x1b\[K", out)
    assert len(redraws) >= 2, out  # redrawn in place, more than once
    assert any("rendering video" in line or "generating image" in line for line in redraws), redraws
    assert any(re.search(r"accepted \d+\.\ds > ", line) for line in redraws), redraws  # finished stages, timed
    assert "succeeded" in out.split("\r\x1b[K")[-1]  # the line was cleared, the summary printed after it


def test_submit_wait_through_a_pipe_writes_plain_lines(stack: LocalStack) -> None:
    done = subprocess.run([*cli_command(), "submit", "a lighthouse in a log", "--steps", "2", "--wait"],
                          env=stack.env, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    stages = re.findall(r"^\[\s*\d+\.\ds\] job [0-9a-f]{8}: (.+)$", done.stderr, re.M)
    assert stages[0] in ("accepted", "generating image") and stages[-1] == "succeeded", done.stderr
    assert len(stages) == len(set(stages)) and "\r" not in done.stderr and "\x1b" not in done.stderr


def test_batch_wait_on_a_terminal_shows_a_bar_and_a_rate(stack: LocalStack, tmp_path: Path) -> None:
    file = tmp_path / "batch.jsonl"
    file.write_text("\n".join(json.dumps({"prompt": f"batch line {i}", "video": {"num_inference_steps": 2}})
                              for i in range(3)) + "\n")  # fmt: skip
    code, out = _on_a_terminal(stack, "batch", str(file), "--api", "--wait")
    assert code == 0, out
    bars = re.findall(r"\rbatch [0-9a-f]{8} \[[#-]{24}\] (\d)/3 done: [^\r]*?\x1b\[K", out)
    assert bars and bars[-1] == "3", out  # redrawn with a bar, up to the last count
    assert re.search(r"jobs/s", out), out
