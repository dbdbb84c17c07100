"""The fault suite's "hostile consumers" phase (issue 25): webhooks and batches under the conditions real consumers
bring, on the embedded local stack, through the front door.

Two callers: A (the local developer) and B (a second IAM user with ``execute-api:Invoke``). Each reads its own signing
secret at ``GET /webhooks/secret``; every receiver verifies with its owner's secret (``bench/hostile_receivers.py``).

- A's jobs deliver to A's receivers that are polite; slow (answer 1 s inside the per-attempt deadline, every time:
  several in one SQS batch must not time the function out); late (answer after the deadline, once); trickle (one
  byte every 0.5 s, twice); hang (twice); answer 503 (twice); and sit behind a host name whose DNS fails
  (``EAI_AGAIN``) twice before it resolves (the local stack's ``.test`` resolver hook: no packet leaves the machine).
  Every one of them recovers, so every event must reach it in the end.
- Another tenant: A's jobs name B's receiver as their webhook, and A signs a forged ``job.succeeded`` with its own
  secret and posts it to B's receiver. B's receiver must accept nothing of A's.
- Batches: A submits batches through ``POST /batches`` (one of them a 2 MB body: 250 jobs whose four text fields are
  2,000 characters; the long run adds the 1,000-job maximum) with a ``batch.completed`` webhook, and one terminal
  event per batch never reaches the batch tracker (the ``sqs_delivery_drop`` hook on BatchEventsQueue): the
  reconciler must free its slot and count it, so every batch completes with one ``batch.completed``.

It reports jobs lost (no terminal event), batches unfinished, deliveries accepted by a receiver that is not the job
owner's, and duplicate deliveries (the same ``webhook-id`` accepted twice by one receiver) by cause: the receiver
answered after the sender's deadline (the sender could not know it was accepted: by design, retried), or anything
else (none may come from another record's failure).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from botocore.credentials import Credentials

from bench.hostile_receivers import Delivery, Receiver
from bench.localstack import PROGRESS_EVENTS, EventCollector, IsolatedStack
from omnireel_client.signing import signed_headers
from omnireel_local import home as homedir

# The delivery function's per-attempt deadline for this phase (lowered from the template's 10 s through the local
# Lambda API, as the hang phase lowers GenerateImage's Timeout): a slow receiver answers after it, a trickling one is
# cut by it. The function's sizing rule holds for any lower deadline.
ATTEMPT_DEADLINE_S = 3
SLOW_S = ATTEMPT_DEADLINE_S - 1
LATE_S = ATTEMPT_DEADLINE_S + 1.5
TRICKLE_EVERY_S = 0.5
BAD_ATTEMPTS = 2  # trickle, hang and 503 on the first two attempts of each event, then answer at once
DNS_FAILURES = 2
DNS_NAME = "flaky-dns.hooks.test"
MAX_FIELD = 2000  # characters: omnireel.jobs.request.MAX_PROMPT_CHARS
FIRST_ATTEMPT_LINES = ("webhook delivered", "webhook attempt failed")  # webhook_delivery's log line per attempt


@dataclass
class HostileBatch:
    batch_id: str
    name: str
    total: int
    body_bytes: int
    status: str = "?"
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class HostileResult:
    jobs: dict[str, str]  # job id -> the receiver (owner/behaviour) its webhook named
    batches: list[HostileBatch]
    receivers: dict[str, Receiver]
    forged_refused: bool
    secrets_distinct: bool
    lost_jobs: list[str]
    unfinished_batches: list[str]
    batch_events: dict[str, int]  # batch id -> its jobs with a terminal event
    batch_jobs_with_two_events: list[str]  # a batch job with two distinct terminal event ids (must be none)
    batch_failures: dict[str, Counter[str]]  # batch id -> stage/code of its failed jobs (terminal events)
    batch_completed_deliveries: dict[str, int]  # batch id -> batch.completed accepted by its webhook
    not_owner_accepted: list[Delivery]
    duplicates: Counter[str]
    duplicate_details: list[str]  # receiver, event and timing of each duplicate
    undelivered: dict[str, list[str]]  # receiver -> job ids whose event it never accepted (hang excluded)
    hang_attempts: int  # attempts the hanging receiver saw (each cut at the deadline, then retried)
    dropped_batch_events: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not (
            self.lost_jobs
            or self.unfinished_batches
            or self.batch_jobs_with_two_events
            or any(self.batch_events.get(b.batch_id, 0) != b.total for b in self.batches)
            or any(n != 1 for n in self.batch_completed_deliveries.values())
            or self.not_owner_accepted
            or self.duplicates.get("other")
            or any(self.undelivered.values())
            or not self.forged_refused
            or not self.secrets_distinct
        )


# ---------------------------------------------------------------------------------------------- callers
@dataclass
class Caller:
    name: str
    credentials: Credentials
    stack: IsolatedStack

    def api(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
        url = f"{self.stack.state['api_url']}{path}"
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
        headers = {"Content-Type": "application/json", **(headers or {})}
        signed = signed_headers(method, url, data, headers, self.credentials, self.stack.state["region"])
        for attempt in range(5):
            try:
                response = self.stack.http.request(method, url, content=data or None, headers=signed, timeout=120)
            except httpx.TransportError:  # the local front door resets connections when its backlog is full
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
                continue
            if response.status_code < 500 or attempt == 4:
                return response
            time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    def secret(self) -> str:
        response = self.api("GET", "/webhooks/secret")
        response.raise_for_status()
        return str(response.json()["secret"])


def _second_caller(stack: IsolatedStack) -> Caller:
    iam = stack.client("iam")
    name = f"{homedir.STACK_NAME}-scratch-hostile-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:*:*:*/*/*/*"}
        ],
    }
    iam.put_user_policy(UserName=name, PolicyName="invoke", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return Caller("B", Credentials(key["AccessKeyId"], key["SecretAccessKey"]), stack)


def _developer(stack: IsolatedStack) -> Caller:
    keys = homedir.developer_credentials(stack.state)
    return Caller("A", Credentials(keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"]), stack)


def _forge(secret: str, event: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """A delivery signed as Standard Webhooks signs it, with ``secret`` (what A can do with its own secret)."""
    body = json.dumps(event).encode()
    msg_id, stamp = f"msg_{uuid.uuid4().hex}", str(int(time.time()))
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": stamp,
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
        "content-type": "application/json",
    }
    return body, headers


# ---------------------------------------------------------------------------------------------- requests
def _job(index: int, webhook: str | None = None, *, big: bool = False) -> dict[str, Any]:
    request: dict[str, Any] = {
        "prompt": f"hostile consumers job {index}: a paper boat on a pond",
        "image": {"size": "512x512", "num_inference_steps": 2},
        "video": {"num_frames": 5, "width": 256, "height": 192, "num_inference_steps": 2},
    }
    if big:  # every text field at its maximum length (ASCII: 2,000 bytes each)
        pad = lambda text: (text + " " + "x" * MAX_FIELD)[:MAX_FIELD]  # noqa: E731
        request["prompt"] = pad(request["prompt"])
        request["negative_prompt"] = pad("blurry")
        request["video"]["prompt"] = pad("the boat drifts")
        request["video"]["negative_prompt"] = pad("jitter")
    if webhook:
        request["webhook"] = webhook
    return request


LAMBDA_MAX_REQUEST_BYTES = 6 * 1024 * 1024  # a Lambda request: the API's event, the body inside it (escaped)
API_EVENT_HEADROOM = 64 * 1024  # the event's other fields: headers, request context


def _upload_batch(stack: IsolatedStack, caller: Any, data: bytes, webhook: str) -> str:
    """``POST /batches/uploads`` for ``data`` (JSONL), the PUT to the presigned URL; the batch id once it exists."""
    reply = caller.api("POST", "/batches/uploads", {"size": len(data), "webhook": webhook})
    if reply.status_code != 201:
        raise RuntimeError(f"batch upload: HTTP {reply.status_code}: {reply.text[:300]}")
    answer = reply.json()
    upload = answer["upload"]
    put = stack.http.request(upload["method"], upload["url"], content=data, headers=upload["headers"], timeout=300)
    if put.status_code >= 300:
        raise RuntimeError(f"batch upload PUT: HTTP {put.status_code}: {put.text[:300]}")
    made = lambda: caller.api("GET", f"/batches/{answer['batch_id']}").status_code == 200  # noqa: E731
    if not _wait(made, time.monotonic() + 120, every=0.5):
        raise RuntimeError(f"batch {answer['batch_id']} did not appear within 120 s of its upload")
    return answer["batch_id"]


def _set_attempt_deadline(stack: IsolatedStack, seconds: float | None, original: dict[str, str]) -> dict[str, str]:
    env = stack.function_env("WebhookDeliveryFunction")
    if seconds is None:
        stack.update_function("WebhookDeliveryFunction", Environment={"Variables": original})
        return original
    stack.update_function(
        "WebhookDeliveryFunction",
        Environment={"Variables": {**env, "WEBHOOK_ATTEMPT_DEADLINE_SECONDS": str(seconds)}},
    )
    return env


def _sender_log(stack: IsolatedStack) -> dict[str, list[dict[str, Any]]]:
    """The webhook delivery function's log lines (JSON after the local worker's prefix) by event id."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in (stack.home / "logs").glob("*WebhookDelivery*.log"):
        for line in path.read_text(errors="replace").splitlines():
            start = line.find("{")
            if start < 0 or "webhook" not in line:
                continue
            try:
                record = json.loads(line[start:])
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event_id"):
                found[str(record["event_id"])].append(record)
    return found


def _wait(condition: Callable[[], bool], deadline: float, every: float = 0.25) -> bool:
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


# ---------------------------------------------------------------------------------------------- the phase
def run_hostile(
    stack: IsolatedStack,
    collector: EventCollector,
    *,
    jobs_per_receiver: int = 2,
    batch_sizes: tuple[tuple[str, int, bool], ...] = (("small", 4, False), ("2 MB", 250, True)),
    timeout_s: float = 240,
    log: Callable[[str], None] = print,
) -> HostileResult:
    started = time.monotonic()
    deadline = started + timeout_s
    a, b = _developer(stack), _second_caller(stack)
    secret_a, secret_b = a.secret(), b.secret()
    receivers = {
        "A/polite": Receiver("A", secret_a, "polite"),
        "A/slow": Receiver("A", secret_a, "slow", delay_s=SLOW_S),
        "A/late": Receiver("A", secret_a, "slow", delay_s=LATE_S, bad_first=1),
        "A/trickle": Receiver("A", secret_a, "trickle", delay_s=TRICKLE_EVERY_S, bad_first=BAD_ATTEMPTS),
        "A/hang": Receiver("A", secret_a, "hang", bad_first=BAD_ATTEMPTS),
        "A/flaky": Receiver("A", secret_a, "flaky", bad_first=BAD_ATTEMPTS),
        "A/dns": Receiver("A", secret_a, "polite"),
        "A/batches": Receiver("A", secret_a, "polite"),
        "B/polite": Receiver("B", secret_b, "polite"),
    }
    original_env: dict[str, str] = {}
    try:
        # The phase measures receivers, not the pipeline: no container faults left from an earlier phase (a duplicated
        # async notification there publishes a terminal event twice, which every consumer sees twice by design).
        for kind in ("images", "videos"):
            stack.emulator(kind, {"faults": {kind: None}})
        original_env = _set_attempt_deadline(stack, ATTEMPT_DEADLINE_S, {})
        dns_port = receivers["A/dns"].url.split(":")[2].split("/")[0]
        # The DNS name fails DNS_FAILURES times from every (re)write of the fault config: more failures, still retried.
        dns = {DNS_NAME: {"fail": DNS_FAILURES, "error": "EAI_AGAIN", "functions": "WebhookDelivery"}}
        stack.platform_faults({"dns": dns})
        urls = {name: r.url for name, r in receivers.items()}
        urls["A/dns"] = f"http://{DNS_NAME}:{dns_port}/hooks/A/dns"

        # Path 1 of another tenant: A forges a delivery with its own secret and posts it to B's receiver.
        forged, headers = _forge(secret_a, {"event_type": "job.succeeded", "job_id": str(uuid.uuid4())})
        forged_reply = httpx.post(receivers["B/polite"].url, content=forged, headers=headers, timeout=10)
        forged_refused = forged_reply.status_code == 401

        # Jobs: A's receivers of every behaviour, and (path 2) A's jobs aimed at B's receiver.
        jobs: dict[str, str] = {}
        index = 0
        for name in ("A/polite", "A/slow", "A/late", "A/trickle", "A/hang", "A/flaky", "A/dns", "B/polite"):
            for _ in range(jobs_per_receiver * (3 if name == "A/slow" else 1)):
                reply = a.api("POST", "/jobs", _job(index, urls[name]), {"Idempotency-Key": f"hostile-{index}"})
                if reply.status_code != 202:
                    raise RuntimeError(f"submit to {name}: HTTP {reply.status_code}: {reply.text[:300]}")
                jobs[reply.json()["job_id"]] = name
                index += 1
        log(f"hostile: {len(jobs)} jobs submitted to {len(receivers) - 1} receivers")

        def batch_done(batch: HostileBatch) -> bool:
            view = a.api("GET", f"/batches/{batch.batch_id}").json()
            batch.status, batch.counts = view.get("status", "?"), view.get("counts") or {}
            return batch.status == "completed"

        def drops() -> int:
            return sum(1 for f in stack.injected() if f.get("kind") == "sqs_delivery_drop")

        # Batches one after the other, each losing exactly one of its own terminal events on the way to the batch
        # tracker (the hook drops the next delivery to BatchEventsQueue; only batch jobs' events go there, and the
        # previous batch has completed): the reconciler must free that job's slot and count it.
        batches: list[HostileBatch] = []
        for label, size, big in batch_sizes:
            before = drops()
            stack.platform_faults({"dns": dns, "sqs_delivery_drop": {"BatchEventsQueue": 1}})
            requests = [_job(10_000 + i, big=big) for i in range(size)]
            body = json.dumps({"jobs": requests, "webhook": urls["A/batches"]}).encode()
            if len(json.dumps(body.decode())) + API_EVENT_HEADROOM > LAMBDA_MAX_REQUEST_BYTES:
                # over Lambda's 6 MB request the API answers 413 (docs/batches.md): the file goes up instead, as the
                # CLI sends it (POST /batches/uploads, then a plain PUT to the presigned URL)
                body = "".join(json.dumps(r) + "\n" for r in requests).encode()
                batch_id = _upload_batch(stack, a, body, urls["A/batches"])
            else:
                reply = a.api("POST", "/batches", body, {"Idempotency-Key": f"hostile-batch-{label.replace(' ', '')}"})
                if reply.status_code != 202:
                    raise RuntimeError(f"batch {label}: HTTP {reply.status_code}: {reply.text[:300]}")
                batch_id = reply.json()["batch_id"]
            batch = HostileBatch(batch_id, label, size, len(body))
            batches.append(batch)
            log(f"hostile: batch {label} ({size} jobs, {len(body):,} bytes) accepted")
            _wait(lambda before=before: drops() > before, deadline, every=0.5)
            stack.platform_faults({"dns": dns})
            _wait(lambda batch=batch: batch_done(batch), deadline, every=1.0)
            log(f"hostile: batch {label} {batch.status} {batch.counts}")

        _wait(lambda: all(collector.terminal(j) for j in jobs), deadline)

        def delivered_all() -> bool:
            for name, receiver in receivers.items():
                if name == "A/batches":
                    continue
                got = {d.job_id for d in receiver.accepted()}
                if name != "B/polite" and not {j for j, r in jobs.items() if r == name} <= got:
                    return False
            batch_ids = {d.batch_id for d in receivers["A/batches"].accepted() if d.event_type == "batch.completed"}
            return {x.batch_id for x in batches} <= batch_ids

        _wait(delivered_all, deadline)
    finally:
        if original_env:
            _set_attempt_deadline(stack, None, original_env)
        stack.platform_faults({})
        for receiver in receivers.values():
            receiver.stop()

    # ------------------------------------------------------------------------------------------ verdict
    lost = [j for j in jobs if not collector.terminal(j)]
    # Each batch line's job: its distinct terminal event ids (one each, whatever SNS redelivers).
    batch_job_events: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    batch_failures: dict[str, Counter[str]] = defaultdict(Counter)  # per batch: stage/code of its failed jobs' events
    for received in collector.received:
        event = received.event
        batch = (event.get("batch") or {}).get("batch_id") if isinstance(event.get("batch"), dict) else None
        if batch and event.get("event_type", "").startswith("job.") and event.get("event_type") not in PROGRESS_EVENTS:
            batch_job_events[batch][event.get("job_id")].add(event.get("event_id"))
            if isinstance(event.get("error"), dict):
                batch_failures[batch][f"{event['error'].get('stage')}/{event['error'].get('code')}"] += 1
    batch_events = {b: len(per_job) for b, per_job in batch_job_events.items()}
    several = [j for per_job in batch_job_events.values() for j, ids in per_job.items() if len(ids) > 1]
    not_owner = [d for d in receivers["B/polite"].accepted()]  # B accepted something of A's
    # Each duplicate is classified by what the SENDER logged for that event (webhook_delivery's JSON log lines): an
    # attempt that got no answer within its deadline while the receiver still acted on it (the receiver was slower
    # than the deadline, by its own clock or the sender's: the sender's deadline also covers resolution and connect);
    # a delivery that reached the receiver but could not be recorded (retried by design); or anything else.
    attempts = _sender_log(stack)
    duplicates: Counter[str] = Counter()
    duplicate_details: list[str] = []
    for name, receiver in receivers.items():
        seen: dict[str, Delivery] = {}
        for delivery in sorted(receiver.accepted(), key=lambda d: d.at):
            first = seen.get(delivery.webhook_id or "")
            if first is None:
                seen[delivery.webhook_id or ""] = delivery
                continue
            logged = attempts.get(delivery.webhook_id or "", [])
            if any(a.get("message") == "webhook attempt failed" and a.get("status") is None for a in logged):
                cause = "answered after the sender's deadline"
            elif any(a.get("message", "").startswith("webhook record failed") for a in logged):
                cause = "delivered, then recording the attempt failed (retried)"
            elif sum(1 for a in logged if a.get("attempt") == 1 and a.get("message") in FIRST_ATTEMPT_LINES) > 1:
                # Two queue messages, each with its own first attempt (delivered, or refused by a flaky receiver and
                # delivered on its retry): the event was published twice upstream (SNS is at-least-once; a crash
                # between publishing and recording it). A batch failure re-sending a delivered record would show the
                # same message again, at receive 2 or later: never a second attempt #1.
                cause = "published twice (two queue messages, same webhook-id)"
            else:
                cause = "other"
            duplicates[cause] += 1
            answered = f"{first.answered_at - first.at:.2f} s" if first.answered_at else "never"
            duplicate_details.append(
                f"{name} {delivery.event_type} {delivery.webhook_id}: {cause}; first accepted {answered} after it "
                f"arrived, again {delivery.at - first.at:.2f} s later; sender: "
                + "; ".join(
                    f"{a.get('message')} #{a.get('attempt')} {a.get('status')} {a.get('error')}" for a in logged
                )
            )
    undelivered: dict[str, list[str]] = {}
    for name, receiver in receivers.items():
        if name in ("A/batches", "B/polite"):
            continue
        got = {d.job_id for d in receiver.accepted()}
        undelivered[name] = [j for j, r in jobs.items() if r == name and j not in got]
    completed = {d.batch_id for d in receivers["A/batches"].accepted() if d.event_type == "batch.completed"}
    completed_count = Counter(  # distinct batch.completed events (webhook-id) accepted per batch
        batch_id
        for batch_id, _ in {
            (d.batch_id, d.webhook_id) for d in receivers["A/batches"].accepted() if d.event_type == "batch.completed"
        }
    )
    return HostileResult(
        jobs=jobs,
        batches=batches,
        receivers=receivers,
        forged_refused=forged_refused,
        secrets_distinct=secret_a != secret_b,
        lost_jobs=lost,
        unfinished_batches=[x.batch_id for x in batches if x.status != "completed" or x.batch_id not in completed],
        batch_events=batch_events,
        batch_jobs_with_two_events=several,
        batch_failures=dict(batch_failures),
        batch_completed_deliveries={x.batch_id: completed_count.get(x.batch_id, 0) for x in batches},
        not_owner_accepted=not_owner,
        duplicates=duplicates,
        duplicate_details=duplicate_details,
        undelivered=undelivered,
        hang_attempts=len(receivers["A/hang"].snapshot()),
        dropped_batch_events=sum(1 for f in stack.injected() if f.get("kind") == "sqs_delivery_drop"),
        seconds=time.monotonic() - started,
    )


def report_section(result: HostileResult, table: Callable[[list[str], list[list[Any]]], str]) -> str:
    rows = []
    for name, receiver in result.receivers.items():
        seen = receiver.snapshot()
        rows.append(
            [
                name,
                sum(1 for r in result.jobs.values() if r == name),
                len(seen),
                sum(1 for d in seen if not d.verified),
                len(receiver.accepted()),
                len({d.webhook_id for d in receiver.accepted()}),
            ]
        )
    batch_rows = [
        [
            x.name,
            x.total,
            f"{x.body_bytes:,}",
            x.status,
            x.counts.get("succeeded", "-"),
            x.counts.get("failed", "-"),
            result.batch_events.get(x.batch_id, 0),
            result.batch_completed_deliveries.get(x.batch_id, 0),
            ", ".join(f"{k} x{v}" for k, v in result.batch_failures.get(x.batch_id, Counter()).most_common()) or "-",
        ]
        for x in result.batches
    ]
    dup = ", ".join(f"{k}: {v}" for k, v in sorted(result.duplicates.items())) or "none"
    lines = [
        "## Hostile consumers (issue 25)",
        "",
        "Two callers (A: the local developer, B: a second IAM user), each with its own signing secret from "
        f"`GET /webhooks/secret`. Per-attempt deadline lowered to {ATTEMPT_DEADLINE_S} s for the phase; "
        f"slow receivers answer after {SLOW_S} s (every attempt), late ones after {LATE_S} s (first attempt), "
        f"trickling ones send one byte every {TRICKLE_EVERY_S} s and hanging ones never answer (first "
        f"{BAD_ATTEMPTS} attempts), flaky ones answer 503 ({BAD_ATTEMPTS} attempts), the DNS receiver's name fails "
        f"EAI_AGAIN {DNS_FAILURES} times. One terminal event per batch is dropped before the batch tracker's queue.",
        "",
        f"- jobs lost (no terminal event): **{len(result.lost_jobs)}** of {len(result.jobs)}",
        f"- batches unfinished: **{len(result.unfinished_batches)}** of {len(result.batches)} "
        f"(terminal events dropped on the way to the tracker: {result.dropped_batch_events})",
        f"- deliveries accepted by a receiver that is not the job owner's: **{len(result.not_owner_accepted)}** "
        f"(A's jobs aimed at B's receiver, and a delivery A forged with its own secret: "
        f"{'refused' if result.forged_refused else 'ACCEPTED'})",
        f"- duplicate deliveries (same webhook-id accepted twice by one receiver): {dup}",
        f"- events a receiver never accepted (every receiver recovers after its bad attempts): "
        f"**{sum(len(v) for v in result.undelivered.values())}**; the hanging receiver saw "
        f"{result.hang_attempts} attempts for {sum(1 for r in result.jobs.values() if r == 'A/hang')} events "
        f"(its first {BAD_ATTEMPTS} per event cut at the deadline)",
        "",
        table(["receiver", "jobs", "requests", "refused (bad signature)", "accepted", "distinct ids"], rows),
        "",
        "Duplicates, each with what the sender logged for its event:",
        "",
        *([f"- {line[:400]}" for line in result.duplicate_details] or ["- none"]),
        "",
        table(
            [
                "batch",
                "jobs",
                "POST body bytes",
                "status",
                "succeeded",
                "failed",
                "jobs with an event",
                "batch.completed",
                "failure codes",
            ],
            batch_rows,
        ),
    ]
    return "\n".join(lines)
