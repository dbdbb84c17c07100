"""``omnireel events`` against the local stack: a replayable log of the job events a subscriber received.

The local stack subscribes one SQS queue to the job-events topic. Reading a queue consumes it, so the CLI moves what
the queue holds into ``<home>/events.jsonl`` (appended first, deleted from the queue after: at-least-once, as SNS
itself) and shows the log. A second ``omnireel events`` shows the same events again plus any new ones; ``--follow``
tails the log while it keeps draining the queue. Every delivery is kept, a duplicate SNS delivery too (consumers
de-duplicate on ``event_id``). The stack empties the log when it starts (a new local AWS has no jobs).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from omnireel_local import home as homedir

from .target import Target

LOG_FILE = homedir.EVENTS_LOG
LOCK_FILE = "events.lock"
MAX_DRAIN_BATCHES = 100  # 1,000 messages per call at most: a bounded drain even if events keep arriving


def log_path(base: Path | None = None) -> Path:
    return (base or homedir.home()) / LOG_FILE


@contextlib.contextmanager
def _locked(base: Path) -> Iterator[None]:
    base.mkdir(parents=True, exist_ok=True)
    with open(base / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def unwrap(body: str) -> dict[str, Any] | None:
    """An SNS->SQS envelope (or a raw message) -> the job event."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("Type") == "Notification" and "Message" in data:
        try:
            data = json.loads(data["Message"])
        except ValueError:
            return None
    return data if isinstance(data, dict) else None


def drain(sqs: Any, url: str, base: Path, wait_s: int = 0) -> int:
    """Move the queue's messages into the log; returns how many events were appended."""
    appended = 0
    for batch in range(MAX_DRAIN_BATCHES):
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_s if batch == 0 else 0
        ).get("Messages", [])
        if not messages:
            break
        events = [e for e in (unwrap(m["Body"]) for m in messages) if e is not None]
        with _locked(base), open(log_path(base), "a") as log:
            for event in events:
                log.write(json.dumps(event, separators=(",", ":")) + "\n")
            log.flush()
        appended += len(events)
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        )
    return appended


def read(base: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete lines of the log from byte ``offset``; returns the events and the offset after the last one."""
    try:
        with open(log_path(base), "rb") as log:
            log.seek(offset)
            data = log.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line still being written is read next time
    events = []
    for line in data[:end].splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return events, offset + end


def show(
    target: Target,
    *,
    follow: bool,
    printer: Callable[[dict[str, Any]], None],
    accept: Callable[[dict[str, Any]], bool],
    timeout: float | None,
) -> int:
    """Print the log (the events ``accept`` keeps), then with ``follow`` keep draining and print new ones."""
    base = homedir.home()
    sqs, url = target.client("sqs"), target.events_queue_url
    assert url is not None
    drain(sqs, url, base)
    events, offset = read(base)
    shown = 0
    for event in events:
        if accept(event):
            printer(event)
            shown += 1
    if not follow:
        return shown
    deadline = time.monotonic() + timeout if timeout else None
    until = f" (stops after {timeout:g} s)" if timeout else " (Ctrl-C to stop)"
    print(f"waiting for job events{until} ...", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while deadline is None or time.monotonic() < deadline:
            wait_s = 2 if deadline is None else max(0, min(2, int(deadline - time.monotonic())))
            drain(sqs, url, base, wait_s=wait_s)
            events, offset = read(base, offset)
            for event in events:
                if accept(event):
                    printer(event)
                    shown += 1
    return shown
