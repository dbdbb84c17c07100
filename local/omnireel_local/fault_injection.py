"""Fault injection in the local stack itself (not in the container emulator). OFF by default; test/bench use only.

The container emulator injects model faults (``PUT <emulator>/_emulator/config``). The faults below are the
*platform's*: what SNS, S3 and Lambda can do to the pipeline in AWS and the emulator cannot show.

- ``sns_drop_rate``: the SageMaker hosting shim writes the async output / failure object but never publishes the
  success/error notification (a lost SNS message). The state machine must reconcile from S3 after the callback's
  heartbeat/timeout.
- ``sns_duplicate_rate``: the shim publishes the notification twice (SNS is at-least-once).
- ``s3_event_duplicate_rate``: an S3 -> Lambda ObjectCreated event is delivered twice, byte-identical.
- ``s3_event_hold``: ``{"prefix": "prompts/held-", "max_s": 60}`` (or a list of prefixes): S3 -> Lambda events for
  object keys under the prefix
  are held back (a late delivery, which S3 may do) until the prefix is taken out of the config, or ``max_s`` seconds
  at the latest (nothing is held forever). Lets a test change the bucket (overwrite, delete a version) between an
  upload and the inbox function's read, deterministically.
- ``request_ttl_cap_s``: the shim caps every async request's ``RequestTTLSeconds`` at this many seconds (SageMaker's
  minimum is 60 s, and the pipeline's settings enforce it), so "expired in the queue" can be provoked in seconds.
- ``lambda_crash``: ``{"<function name substring>": {"rate": 0.2, "after_s": 0.05}}``: the Lambda runner sends the
  event to the worker, lets it run ``after_s`` seconds, then SIGKILLs it; the invocation fails with
  ``Runtime.ExitError`` whether or not the handler had finished (side effects may or may not have happened).
  ``"first": true`` also crashes the first invocation of a matching function after the config took effect, so a short
  run is sure to see at least one crash (job ids depend on the stack's random developer key, so the draws do too).
- ``sqs_delivery_drop``: ``{"<queue name substring>": N}``: the next N messages SNS would deliver (after the
  subscription's filter) to a queue whose name contains the substring are dropped (a lost delivery: issue 25 item 8,
  a batch job's terminal event that never reaches BatchEventsQueue). Counted from when the config took effect.
- ``sqs_send_failure``: ``{"<queue name substring>": rate}``: SendMessage / SendMessageBatch to a matching queue
  answers ``RequestThrottled`` (HTTP 400, retried by the SDK until its attempts run out), e.g. the batch queue while
  POST /batches queues its lines (issue 25 item 10).
- ``sfn_start_failure_rate``: Step Functions StartExecution answers ``ThrottlingException`` (HTTP 400, retried by
  boto3 until its attempts run out), so a job record exists whose execution never started - what the job deadline's
  safety net (FailOverdueJobs) must end.

- ``dynamodb_throttle``: ``{"match": ["<job id>", "webhook_deliveries"], "count": 4}``: the next ``count`` DynamoDB
  requests whose JSON body contains every ``match`` string answer ``ProvisionedThroughputExceededException`` (HTTP
  400; botocore's standard mode retries it, 4 attempts in all), as a hot key does on AWS (moto patch 28).
- ``dns``: the resolver hook of the Lambda functions for host names under ``.test`` (``local_dns.py``: fail N times
  with ``EAI_AGAIN`` / ``EAI_FAIL`` / ``EAI_NONAME``, then answer a loopback address). Read by the function
  processes themselves from the config file (not from ``OMNIREEL_LOCAL_FAULTS``).

Configuration (JSON object with the keys above plus ``seed``): the environment variable ``OMNIREEL_LOCAL_FAULTS`` of
the stack process at start, replaced at runtime by ``<OMNIREEL_HOME>/fault-injection.json`` whenever that file
changes (write it atomically; delete it or write ``{}`` to turn everything off). Decisions are deterministic: a hash of
(seed, fault kind, key, how many times this key was seen), where the key is the inference id, the S3 bucket/key, or
the function name + event payload; so the same jobs get the same faults whatever the timing. Every injected fault is
appended to ``<OMNIREEL_HOME>/fault-injection.log.jsonl`` (``{"t": epoch, "kind", "key", ...}``) for reports.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

log = logging.getLogger("omnireel_local.faults")

ENV = "OMNIREEL_LOCAL_FAULTS"
CONFIG_FILE = "fault-injection.json"
LOG_FILE = "fault-injection.log.jsonl"

_lock = threading.Lock()
_home: Path | None = None
_config_path: str | None = None  # str(_home / CONFIG_FILE): stat'ed on every DynamoDB item call, so no Path per call
_base: dict[str, Any] = {}
_config: dict[str, Any] = {}
_mtime: float | None = None
_seen: Counter[str] = Counter()


def configure(home: Path) -> None:
    """Called once by the stack supervisor: where the runtime config file and the injection log live."""
    global _home, _config_path, _base, _config
    _home = home
    _config_path = os.fspath(home / CONFIG_FILE)
    raw = os.environ.get(ENV)
    _base = json.loads(raw) if raw else {}
    _config = dict(_base)
    if _base:
        log.warning("fault injection ON from %s: %s", ENV, _base)


def _current() -> dict[str, Any]:
    global _config, _mtime
    if _home is None or _config_path is None:
        return _config
    try:
        mtime = os.stat(_config_path).st_mtime
    except OSError:
        mtime = None
    if mtime != _mtime:
        path = _home / CONFIG_FILE
        with _lock:
            _mtime = mtime
            try:
                _config = {**_base, **json.loads(path.read_text())} if mtime is not None else dict(_base)
            except (OSError, ValueError):
                log.exception("unreadable %s; fault injection unchanged", path)
            _seen.clear()
            if _config:
                log.warning("fault injection config: %s", _config)
    return _config


def _draw(config: dict[str, Any], kind: str, key: str) -> float:
    with _lock:
        _seen[f"{kind}|{key}"] += 1
        nth = _seen[f"{kind}|{key}"]
    digest = hashlib.sha256(f"{config.get('seed', 0)}|{kind}|{key}|{nth}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _first_time(name: str) -> bool:
    """True the first time ``name`` is asked since the config last changed."""
    with _lock:
        _seen[name] += 1
        return _seen[name] == 1


def record(kind: str, key: str, **extra: Any) -> None:
    log.warning("fault injected: %s %s %s", kind, key, extra or "")
    if _home is None:
        return
    line = json.dumps({"t": time.time(), "kind": kind, "key": key, **extra})
    with _lock, open(_home / LOG_FILE, "a") as out:
        out.write(line + "\n")


def notification(inference_id: str, status: str) -> str | None:
    """SageMaker async notification: "drop", "duplicate" or None (publish normally)."""
    config = _current()
    drop, dup = float(config.get("sns_drop_rate", 0)), float(config.get("sns_duplicate_rate", 0))
    if not (drop or dup):
        return None
    value = _draw(config, "sns", inference_id)
    if value < drop:
        record("sns_drop", inference_id, status=status)
        return "drop"
    if value < drop + dup:
        record("sns_duplicate", inference_id, status=status)
        return "duplicate"
    return None


def request_ttl(ttl_s: float) -> float:
    cap = _current().get("request_ttl_cap_s")
    if cap is not None and float(cap) < ttl_s:
        return float(cap)
    return ttl_s


def _rate_hit(rate_setting: str, kind: str, key: str, fault: str) -> bool:
    """True (and recorded as ``fault``) when the draw for ``key`` falls under the configured ``rate_setting``."""
    config = _current()
    rate = float(config.get(rate_setting, 0))
    if rate and _draw(config, kind, key) < rate:
        record(fault, key)
        return True
    return False


def duplicate_s3_event(key: str) -> bool:
    return _rate_hit("s3_event_duplicate_rate", "s3", key, "s3_event_duplicate")


def s3_event_hold(object_key: str) -> float | None:
    """``max_s`` while ``s3_event_hold`` holds this object key's events back, else None (deliver now)."""
    spec = _current().get("s3_event_hold") or {}
    prefixes = spec.get("prefix") or []
    prefixes = [prefixes] if isinstance(prefixes, str) else prefixes
    if not any(object_key.startswith(prefix) for prefix in prefixes):
        return None
    return float(spec.get("max_s", 60))


def lambda_crash(function_name: str, payload: str) -> float | None:
    """Seconds to let the invocation run before killing its worker, or None (no crash)."""
    config = _current()
    for pattern, spec in (config.get("lambda_crash") or {}).items():
        if pattern.lower() in function_name.lower():
            key = f"{function_name}|{hashlib.sha256(payload.encode()).hexdigest()[:16]}"
            first = bool(spec.get("first")) and _first_time(f"lambda_first|{pattern}")
            if first or _draw(config, "lambda", key) < float(spec.get("rate", 0)):
                after = float(spec.get("after_s", 0.05))
                job = ""
                with contextlib.suppress(ValueError, AttributeError):
                    job = json.loads(payload).get("job_id", "")
                record("lambda_crash", function_name, job_id=job, after_s=after)
                return after
    return None


def start_execution_failure(name: str) -> bool:
    """Step Functions StartExecution for execution ``name``: True to refuse it (throttled)."""
    return _rate_hit("sfn_start_failure_rate", "sfn_start", name, "sfn_start_failure")


def dynamodb_throttle_armed() -> bool:
    """Whether a ``dynamodb_throttle`` is configured at all (the hook reads a request's body only then)."""
    return bool(_current().get("dynamodb_throttle"))


def dynamodb_throttle(body: str) -> bool:
    """True to answer this DynamoDB request with a throttle (``dynamodb_throttle``: its ``count`` is used up by the
    requests that match, in any function)."""
    spec = _current().get("dynamodb_throttle") or {}
    matches = spec.get("match") or []
    if not matches or not all(str(m) in body for m in matches):
        return False
    with _lock:
        _seen["dynamodb_throttle"] += 1
        nth = _seen["dynamodb_throttle"]
    if nth > int(spec.get("count", 0)):
        return False
    record("dynamodb_throttle", str(matches[0]), nth=nth)
    return True


def drop_sqs_delivery(queue_name: str) -> bool:
    """SNS -> SQS delivery to ``queue_name``: True to drop it (``sqs_delivery_drop``)."""
    for pattern, count in (_current().get("sqs_delivery_drop") or {}).items():
        if pattern in queue_name:
            with _lock:
                _seen[f"sqs_drop|{pattern}"] += 1
                nth = _seen[f"sqs_drop|{pattern}"]
            if nth <= int(count):
                record("sqs_delivery_drop", queue_name, nth=nth)
                return True
    return False


def sqs_send_failure(queue_name: str) -> bool:
    """SendMessage(Batch) to ``queue_name``: True to refuse it as throttled (``sqs_send_failure``)."""
    config = _current()
    for pattern, rate in (config.get("sqs_send_failure") or {}).items():
        if pattern in queue_name and _draw(config, "sqs_send", queue_name) < float(rate):
            record("sqs_send_failure", queue_name)
            return True
    return False
