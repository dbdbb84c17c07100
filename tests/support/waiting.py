"""Bounded waits for the tests: poll a condition with the client's back-off until it holds or a timeout fails the
test (never a bare sleep as synchronisation)."""

from __future__ import annotations

import time

from omnireel_client.client import poll_delays


def poll_intervals():  # type: ignore[no-untyped-def]
    """The pauses between two polls of a bounded wait: the client's back-off (``omnireel_client.client.poll_delays``)
    from 0.2 s to at most 1 s.

    Most predicates ask the local stack (GET /jobs/{id} through the front door: SigV4, IAM, a Lambda invocation, a
    DynamoDB read), ~20 ms of CPU on a shared 2-core machine per poll. At a fixed 0.2 s a test waiting half a minute
    for a video burned ~3 CPU-s asking; this way what ends quickly is still seen within a fraction of a second, and
    a long wait costs a poll a second (a wait ends at most 1 s after its condition holds)."""
    return poll_delays(first=0.2, most=1.0)


def wait_for(predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` (``poll_intervals``) until it returns something truthy (returned), or fail after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    for pause in poll_intervals():
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(pause, left))
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
