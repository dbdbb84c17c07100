"""Issue 33 items 8 and 9 in process: what a caller sees of an attempt is one coarse class, never the network's precise
answer (a closed port, a port that accepts and says nothing, a reset and a non-HTTP answer all read the same), and an
attempt the stack could not sign (its master key unreadable) is recorded, not lost.

Real receivers on 127.0.0.1 only; the targets that would be public are stubbed resolvers (nothing leaves loopback).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from omnireel.core.errors import SigningKeyUnavailable
from omnireel.webhooks.delivery import UNREACHABLE_ERROR, AttemptResult, Outcome, post
from omnireel.webhooks.dispatch import QueuedEvent, deliver
from omnireel.webhooks.target import WebhookTarget

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BOUND_S = 15


class _Jobs:
    def __init__(self) -> None:
        self.recorded: list[dict[str, Any]] = []

    def record_webhook_attempt(self, job_id: str, event_type: str, state: dict[str, Any]) -> None:
        self.recorded.append(state)


@contextlib.contextmanager
def _listener(behaviour: str) -> Iterator[int]:
    """A loopback port that ``closed`` (nothing listens), ``silent`` (accepts, never answers), ``reset`` (accepts and
    resets the connection) or ``garbage`` (answers bytes that are not HTTP)."""
    if behaviour == "closed":
        probe = socket.create_server(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        yield port
        return
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(BOUND_S)
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                if behaviour == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    return
                conn.recv(65536)
                if behaviour == "garbage":
                    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                stop.wait(BOUND_S)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(BOUND_S)


def _post(port: int, deadline_s: float = 1.5) -> AttemptResult:
    target = WebhookTarget("http", "127.0.0.1", port, "/", "127.0.0.1")
    return post(target, b"{}", {}, connect_timeout_s=1, deadline=time.monotonic() + deadline_s)


def test_closed_silent_reset_and_non_http_ports_read_the_same_to_the_caller() -> None:
    seen: dict[str, AttemptResult] = {}
    for behaviour in ("closed", "silent", "reset", "garbage"):
        with _listener(behaviour) as port:
            seen[behaviour] = _post(port)
    shown = {(r.outcome, r.status, r.error) for r in seen.values()}
    assert shown == {(Outcome.UNREACHABLE, None, UNREACHABLE_ERROR)}, shown
    details = {behaviour: result.detail for behaviour, result in seen.items()}
    assert len(set(details.values())) == 4, details  # the logs still tell them apart
    assert "Refused" in (details["closed"] or "") and "deadline" in (details["silent"] or "")


@pytest.mark.parametrize(("status", "error"), [(401, "HTTP 401"), (302, "HTTP 302: redirects are not followed")])
def test_an_answer_is_shown_with_its_status(status: int, error: str) -> None:
    result = AttemptResult.answered(status)
    assert (result.outcome, result.status, result.error, result.delivered) == (Outcome.REJECTED, status, error, False)
    assert AttemptResult.answered(204).outcome == Outcome.DELIVERED and AttemptResult.answered(204).error is None


def _queued() -> QueuedEvent:
    return QueuedEvent("https://hooks.example.com/in", '{"event_id": "ev-1"}', "ev-1", "job.succeeded", "j-1")


class _Clock:
    """A wall clock that moves 7 s per reading: the recorded time must be the attempt's start."""

    def __init__(self) -> None:
        self.at = datetime(2026, 12, 4, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.at += timedelta(seconds=7)
        return self.at


def test_the_recorded_state_has_the_coarse_class_and_the_attempts_start_time() -> None:
    jobs, clock = _Jobs(), _Clock()
    delivery = deliver(
        _queued(), 2, secret=SECRET, allow_loopback_http=False, jobs=jobs, now=clock,  # type: ignore[arg-type]
        resolve=lambda host, port: ["93.184.215.14"], deadline=time.monotonic() + 5,
        send=lambda *a, **k: AttemptResult.unreachable("connect: ConnectionRefusedError: [Errno 111]"),
    )  # fmt: skip
    (state,) = jobs.recorded
    assert delivery.retry is True
    assert state["outcome"] == "unreachable" and state["last_error"] == UNREACHABLE_ERROR
    assert "Refused" not in str(state) and state["last_attempt_at"] == "2026-12-04T12:00:07.000Z"


def test_an_attempt_the_stack_cannot_sign_is_recorded_as_not_signed_and_retried() -> None:
    """The single secret of before per-caller secrets (or an unreadable one) signs nothing: the job says so."""
    sent: list[object] = []

    def unreadable() -> tuple[str, ...]:
        raise SigningKeyUnavailable("the webhook master key is malformed: no use marker")

    jobs = _Jobs()
    delivery = deliver(
        _queued(), 1, secret=unreadable, allow_loopback_http=False, jobs=jobs, now=_Clock(),  # type: ignore[arg-type]
        resolve=lambda host, port: ["93.184.215.14"], deadline=time.monotonic() + 5,
        send=lambda *a, **k: sent.append(a),
    )  # fmt: skip
    (state,) = jobs.recorded
    assert sent == [] and delivery.retry is True
    assert (state["outcome"], state["last_status"], state["delivered_at"]) == ("not_signed", None, None)
    assert "signing key" in state["last_error"] and "use marker" not in state["last_error"]
