"""Issue 25, items 3-5 in process: one deadline per attempt against real loopback receivers that trickle, hang or
never finish the TLS handshake; a host that does not resolve is retried (stubbed resolvers: nothing leaves
loopback); one record's failure backs off and fails that record only."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from omnireel.events.published import RecordedDelivery
from omnireel.webhooks import delivery
from omnireel.webhooks.delivery import AttemptResult, post
from omnireel.webhooks.dispatch import (
    DeliveryPolicy,
    Invocation,
    QueuedEvent,
    ReceivedRecord,
    WebhookAttemptFailed,
    deliver,
    process_record,
)
from omnireel.webhooks.secrets import MasterKeys
from omnireel.webhooks.target import WebhookRefused, WebhookTarget, WebhookUnresolved, resolve_target

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BOUND_S = 20  # no test waits longer than this for anything


@dataclass
class Receiver:
    """A loopback TCP receiver with a behaviour: ``trickle`` (an answer one byte per ``every_s``), ``hang`` (reads the
    request, never answers) or ``silent`` (never reads: a TLS client waits in its handshake)."""

    mode: str
    every_s: float = 0.5
    port: int = 0
    sent_bytes: int = 0
    peer_closed: threading.Event = field(default_factory=threading.Event)
    accepted: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def serve(self, listener: socket.socket) -> None:
        conn, _ = listener.accept()
        self.accepted.set()
        with conn:
            if self.mode != "silent":
                conn.recv(65536)  # the request (small: one recv is enough on loopback)
            answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
            ends = time.monotonic() + BOUND_S
            while not self.stop.is_set() and time.monotonic() < ends:
                readable, _, _ = select.select([conn], [], [], self.every_s)
                if readable:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        data = b""
                    if not data:  # the client shut the connection down
                        self.peer_closed.set()
                        return
                    continue
                if self.mode == "trickle" and self.sent_bytes < len(answer):
                    with contextlib.suppress(OSError):
                        conn.send(answer[self.sent_bytes : self.sent_bytes + 1])
                        self.sent_bytes += 1


@contextlib.contextmanager
def receiver(mode: str, every_s: float = 0.5) -> Iterator[Receiver]:
    listener = socket.create_server(("127.0.0.1", 0))
    spec = Receiver(mode, every_s, listener.getsockname()[1])
    thread = threading.Thread(target=spec.serve, args=(listener,), daemon=True)
    thread.start()
    try:
        yield spec
    finally:
        spec.stop.set()
        with contextlib.suppress(OSError):  # unblock an accept that never came
            socket.create_connection(("127.0.0.1", spec.port), timeout=1).close()
        thread.join(BOUND_S)
        listener.close()


def _post_in_thread(target: WebhookTarget, deadline_s: float, **kwargs: object) -> list[AttemptResult]:
    results: list[AttemptResult] = []
    thread = threading.Thread(
        target=lambda: results.append(
            post(target, b"{}", {}, connect_timeout_s=3, deadline=time.monotonic() + deadline_s, **kwargs)  # type: ignore[arg-type]
        ),
        daemon=True,
    )
    thread.start()
    thread.join(BOUND_S)
    assert results, "the attempt did not end"
    return results


def test_a_receiver_trickling_its_answer_is_cut_at_the_deadline() -> None:
    """One byte every 0.25 s never trips a per-read timeout; the attempt's one deadline (1 s) cuts it."""
    with receiver("trickle", every_s=0.25) as trickler:
        target = WebhookTarget("http", "127.0.0.1", trickler.port, "/", "127.0.0.1")
        (result,) = _post_in_thread(target, 1.0)
        assert trickler.peer_closed.wait(BOUND_S), "the receiver never saw the attempt end"
    assert result.status is None and not result.delivered
    assert (result.detail or "").startswith("deadline") and result.outcome == "unreachable"
    # the whole answer is 40 bytes: the attempt ended after a few, not when the trickle was done
    assert 0 < trickler.sent_bytes < 20


def test_a_receiver_that_never_answers_is_cut_at_the_deadline() -> None:
    with receiver("hang") as hanging:
        target = WebhookTarget("http", "127.0.0.1", hanging.port, "/", "127.0.0.1")
        (result,) = _post_in_thread(target, 0.5)
        assert hanging.peer_closed.wait(BOUND_S)
    assert result.status is None and (result.detail or "").startswith("deadline")


def test_a_tls_handshake_that_never_completes_is_cut_at_the_deadline() -> None:
    with receiver("silent") as silent:
        target = WebhookTarget("https", "hooks.example.com", silent.port, "/", "127.0.0.1")
        (result,) = _post_in_thread(target, 0.5, tls=ssl.create_default_context())
        assert silent.accepted.is_set() and silent.peer_closed.wait(BOUND_S)
    assert result.status is None and (result.detail or "").startswith("deadline")


def test_https_attempts_share_one_verifying_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the system's CA certificates costs ~40 ms of CPU (more at a Lambda's share of a vCPU): an https attempt
    with no context of its own takes the one made for the execution environment, which verifies certificates and host
    names as ``ssl.create_default_context()`` does."""
    made: list[ssl.SSLContext] = []
    create = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    delivery.default_tls.cache_clear()
    try:
        for _ in range(2):
            with receiver("silent") as silent:
                target = WebhookTarget("https", "hooks.example.com", silent.port, "/", "127.0.0.1")
                (result,) = _post_in_thread(target, 0.3)
                assert silent.accepted.is_set()
            assert (result.detail or "").startswith("deadline")
        assert len(made) == 1
        assert made[0].verify_mode == ssl.CERT_REQUIRED and made[0].check_hostname
    finally:
        delivery.default_tls.cache_clear()


def test_no_time_left_means_no_connection() -> None:
    with receiver("hang") as hanging:
        target = WebhookTarget("http", "127.0.0.1", hanging.port, "/", "127.0.0.1")
        (result,) = _post_in_thread(target, -1.0)
        assert not hanging.accepted.is_set()
    assert result.status is None and not result.delivered


# ---------------------------------------------------------------- item 5: DNS failures are retried
def _queued(url: str = "https://hooks.example.com/in"):  # type: ignore[no-untyped-def]
    body = json.dumps({"event_id": "ev-1", "event_type": "job.succeeded", "job_id": "j-1"})
    return QueuedEvent(url, body, "ev-1", "job.succeeded", "j-1")  # as rebuilt from the job's record (issue 33)


class _Jobs:
    def __init__(self) -> None:
        self.recorded: list[dict] = []

    def record_webhook_attempt(self, job_id: str, event_type: str, state: dict) -> None:
        self.recorded.append(state)


def _now() -> datetime:
    return datetime(2026, 12, 1, tzinfo=UTC)


def _failing(error: BaseException):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> list[str]:
        raise error

    return resolve


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), "EAI_AGAIN"),  # SERVFAIL too
        (socket.gaierror(socket.EAI_FAIL, "Non-recoverable failure in name resolution"), "EAI_FAIL"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "EAI_NONAME"),  # NXDOMAIN
        (TimeoutError("resolver timed out"), "TimeoutError"),
    ],
)
def test_a_host_that_does_not_resolve_at_delivery_is_retried(error: BaseException, shown: str) -> None:
    sent: list[object] = []
    jobs = _Jobs()
    delivery = deliver(
        _queued(), 2, secret=SECRET, allow_loopback_http=False, jobs=jobs, now=_now,  # type: ignore[arg-type]
        resolve=_failing(error), send=lambda *a, **k: sent.append(a), deadline=time.monotonic() + 5,
    )  # fmt: skip
    assert sent == [] and delivery.retry is True
    (state,) = jobs.recorded
    assert state["refused"] is False and state["outcome"] == "unreachable"  # the caller's coarse class (issue 33)
    detail = delivery.result.detail or ""
    assert shown in detail and "does not resolve" in detail and shown not in state["last_error"]  # logs only


def test_a_resolver_that_never_answers_is_cut_at_the_attempt_deadline_and_retried() -> None:
    release = threading.Event()

    def hangs(host: str, port: int) -> list[str]:
        release.wait(BOUND_S)
        return ["93.184.215.14"]

    try:
        delivery = deliver(
            _queued(), 1, secret=SECRET, allow_loopback_http=False, jobs=None, now=_now,
            resolve=hangs, send=lambda *a, **k: AttemptResult(204), deadline=time.monotonic() + 0.3,
        )  # fmt: skip
    finally:
        release.set()
    assert delivery.retry is True and "TimeoutError" in (delivery.result.detail or "")


def test_only_an_address_refused_by_policy_ends_the_retries() -> None:
    delivery = deliver(
        _queued(), 1, secret=SECRET, allow_loopback_http=False, jobs=None, now=_now,
        resolve=lambda host, port: ["10.0.0.8"], send=lambda *a, **k: AttemptResult(204),
        deadline=time.monotonic() + 5,
    )  # fmt: skip
    assert delivery.retry is False and "private" in (delivery.result.error or "")


def test_a_name_that_is_not_a_valid_host_name_is_refused_for_good() -> None:
    with pytest.raises(WebhookRefused) as refused:
        resolve_target("https://a.example/", allow_loopback_http=False, resolve=_failing(UnicodeError("label")))
    assert not isinstance(refused.value, WebhookUnresolved)


def test_local_test_names_may_be_http_only_to_loopback_and_only_where_loopback_http_is_allowed() -> None:
    url = "http://flaky.hooks.test:8080/in"
    target = resolve_target(url, allow_loopback_http=True, resolve=lambda h, p: ["127.0.0.1"])
    assert (target.scheme, target.host, target.address, target.port) == ("http", "flaky.hooks.test", "127.0.0.1", 8080)
    with pytest.raises(WebhookRefused, match="https://"):  # AWS: WebhookAllowLoopbackHttp is false
        resolve_target(url, allow_loopback_http=False, resolve=lambda h, p: ["127.0.0.1"])
    with pytest.raises(WebhookRefused, match="https://"):  # a .test name pointing anywhere but loopback
        resolve_target(url, allow_loopback_http=True, resolve=lambda h, p: ["127.0.0.1", "10.0.0.1"])
    with pytest.raises(WebhookUnresolved):
        resolve_target(url, allow_loopback_http=True, resolve=_failing(socket.gaierror(socket.EAI_AGAIN, "again")))
    with pytest.raises(WebhookRefused, match="loopback"):  # https to a name resolving to loopback: the policy
        resolve_target("https://flaky.hooks.test/", allow_loopback_http=True, resolve=lambda h, p: ["127.0.0.1"])


# ---------------------------------------------------------------- item 3: one record, isolated
def _body() -> str:
    return json.dumps(
        {
            "Message": json.dumps({"event_id": "ev-9", "event_type": "job.failed", "job_id": "j-9"}),
            "MessageAttributes": {"webhook": {"Type": "String", "Value": "https://hooks.example.com/"}},
        }
    )


class _Published:
    """The stack's record of the event (issue 33: the message gives only identifiers)."""

    def delivery(self, ids):  # type: ignore[no-untyped-def]
        return RecordedDelivery("https://hooks.example.com/", "{}", ids.event_id, ids.event_type, ids.job_id)


class _Queue:
    """The webhook queue adapter: the retries the record asked for, as (receipt handle, seconds)."""

    def __init__(self) -> None:
        self.retried: list[tuple[str, int]] = []

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        self.retried.append((receipt_handle, seconds))


class _Master:
    def keys(self) -> MasterKeys:
        return MasterKeys("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")


class _Owners:
    def of_job(self, job_id: str) -> str | None:
        return "AIDAALICE"


POLICY = DeliveryPolicy(
    allow_loopback_http=False, attempt_deadline_s=5, connect_timeout_s=3, retry_base_s=30, max_attempts=13
)


def _process(body: str, receive_count: int, queue: _Queue, jobs: object = None, answer: int = 204):  # type: ignore[no-untyped-def]
    """One record through ``process_record`` with the stack's record, a public address and a receiver that answers
    ``answer``."""
    started = time.monotonic()
    return process_record(
        ReceivedRecord(body, receive_count, f"rh-{receive_count}"), published=_Published(), queue=queue,  # type: ignore[arg-type]
        policy=POLICY, invocation=Invocation(started, started + 30), master=_Master(), owners=_Owners(),  # type: ignore[arg-type]
        jobs=jobs, batches=None, now=_now, resolve=lambda host, port: ["93.184.215.14"],  # type: ignore[arg-type]
        send=lambda *a, **k: AttemptResult.answered(answer),
    )  # fmt: skip


def test_a_failed_attempt_backs_off_and_fails_its_record() -> None:
    queue = _Queue()
    with pytest.raises(WebhookAttemptFailed, match="HTTP 500"):
        _process(_body(), 4, queue, answer=500)
    assert queue.retried == [("rh-4", 240)]  # 30 s doubling: the fourth attempt waits 240 s
    with pytest.raises(WebhookAttemptFailed):
        _process(_body(), POLICY.max_attempts, queue, answer=500)
    assert queue.retried[-1] == (f"rh-{POLICY.max_attempts}", 0)  # the last: visible now, the next receive DLQs it


def test_an_error_recording_the_attempt_backs_off_and_fails_its_record() -> None:
    queue = _Queue()

    class Throttled:
        def record_webhook_attempt(self, job_id: str, event_type: str, state: dict) -> None:
            raise RuntimeError("ProvisionedThroughputExceededException")

    with pytest.raises(RuntimeError, match="Throughput"):
        _process(_body(), 1, queue, jobs=Throttled())
    assert queue.retried == [("rh-1", 30)]


def test_a_delivered_or_refused_record_succeeds_without_backoff_and_garbage_is_dropped() -> None:
    queue = _Queue()
    delivery = _process(_body(), 1, queue)
    assert delivery is not None and delivery.retry is False and delivery.result.delivered
    assert _process("not json", 1, queue) is None
    assert queue.retried == []


def test_an_attempt_with_no_time_left_sends_nothing_and_is_retried() -> None:
    sent: list[object] = []
    delivery = deliver(
        _queued(), 1, secret=SECRET, allow_loopback_http=False, jobs=None, now=_now,
        resolve=lambda host, port: ["93.184.215.14"], send=lambda *a, **k: sent.append(a) or AttemptResult(204),
        deadline=time.monotonic() - 1,
    )  # fmt: skip
    assert sent == [] and delivery.retry is True and (delivery.result.detail or "").startswith("deadline")
