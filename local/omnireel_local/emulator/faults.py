"""Latency and fault injection per route kind, deterministic with a seed, plus request statistics.

Each route kind (images / videos / speech) has its own ``random.Random``; every request draws the same number of
values whatever the rates are, so a given seed gives the same sequence of outcomes for the same request sequence.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Literal

from .config import ROUTE_KINDS, EmulatorConfig, RouteKind
from .errors import EmulatorError

Outcome = Literal["ok", "throttle", "error", "hang", "malformed"]

_KIND_OFFSET = {"images": 1, "videos": 2, "speech": 3}


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    latency_s: float
    hang_s: float

    @property
    def malformed(self) -> bool:
        return self.outcome == "malformed"


class FaultInjector:
    """Draws per-request outcomes and keeps counters. Thread-safe enough for uvicorn's single event loop."""

    def __init__(self, config: EmulatorConfig) -> None:
        self._lock = threading.Lock()
        self.reseed(config.seed)
        self.route_counts: dict[str, Counter[str]] = {kind: Counter() for kind in ROUTE_KINDS}
        self.path_counts: dict[str, Counter[str]] = {}
        # (path, status, started, finished, body sha256) of the last POSTs, epoch seconds: the container's own service
        # time per request, so a benchmark can take each job's model time out of its end-to-end time
        # (bench/orchestration_overhead.py tells the variants' requests apart by the digest of what each sent).
        self.service_times: deque[tuple[str, int, float, float, str]] = deque(maxlen=2000)

    def reseed(self, seed: int | None) -> None:
        with self._lock:
            self._rngs = {
                kind: random.Random(None if seed is None else seed * 1000 + _KIND_OFFSET[kind]) for kind in ROUTE_KINDS
            }
            self._seed_rng = random.Random(seed)

    def random_seed(self) -> int:
        """A "random" uint32 seed, as the server picks for ``seed: null`` (deterministic under a config seed)."""
        with self._lock:
            return self._seed_rng.getrandbits(32)

    def decide(self, config: EmulatorConfig, kind: RouteKind, steps: int | None = None) -> Decision:
        faults = config.faults_for(kind)
        with self._lock:
            rng = self._rngs[kind]
            draws = [rng.random() for _ in range(4)]
        if draws[0] < faults.throttle_rate:
            outcome: Outcome = "throttle"
        elif draws[1] < faults.error_rate:
            outcome = "error"
        elif draws[2] < faults.hang_rate:
            outcome = "hang"
        elif draws[3] < faults.malformed_rate:
            outcome = "malformed"
        else:
            outcome = "ok"
        latency = faults.latency_s + faults.latency_per_step_s * (steps or 0)
        self.count(kind, "requests")
        self.count(kind, outcome)
        return Decision(outcome=outcome, latency_s=latency, hang_s=faults.hang_max_s)

    def count(self, kind: RouteKind, key: str) -> None:
        with self._lock:
            self.route_counts[kind][key] += 1

    def count_response(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.path_counts.setdefault(f"{method} {path}", Counter())[str(status)] += 1

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "routes": {kind: dict(counter) for kind, counter in self.route_counts.items()},
                "paths": {path: dict(counter) for path, counter in self.path_counts.items()},
                "service_times": [list(entry) for entry in self.service_times],
            }

    def record_service_time(self, path: str, status: int, started: float, finished: float, body_sha256: str) -> None:
        with self._lock:
            self.service_times.append((path, status, started, finished, body_sha256))

    def reset_stats(self) -> None:
        with self._lock:
            for counter in self.route_counts.values():
                counter.clear()
            self.path_counts.clear()
            self.service_times.clear()


def raise_if_throttled(decision: Decision) -> None:
    """A throttle answers at once: it neither waits for nor takes a slot of the container (``capacity``)."""
    if decision.outcome == "throttle":
        raise EmulatorError(429, "Too many requests: injected throttle (emulator)")


async def apply_http_faults(decision: Decision, failure_prefix: str) -> None:
    """Run the emulated model time and raise for throttle / error / hang. Returns normally for ok and malformed."""
    raise_if_throttled(decision)
    if decision.latency_s > 0:
        await asyncio.sleep(decision.latency_s)
    if decision.outcome == "error":
        raise EmulatorError(500, f"{failure_prefix}: injected fault")
    if decision.outcome == "hang":
        await asyncio.sleep(decision.hang_s)
        raise EmulatorError(500, f"{failure_prefix}: injected hang ended after {decision.hang_s:g}s")
