"""Admission's records and rules (pure): an endpoint's pool of slots, the jobs waiting for one, and who is served next.

- capacity(kind) = instances in service x per-instance concurrency; an async (video) endpoint scaled to zero keeps one
  instance's worth, so a bounded backlog reaches SageMaker's own queue and its scale-from-zero alarm.
- fair share: a free slot goes to the caller with waiting work who was served least recently (round-robin across
  callers); within a caller, first come first served (the waiting entries' sort key starts with the caller's key and
  then the enqueue time).
"""

from __future__ import annotations

import hashlib
from typing import Literal

import msgspec

Kind = Literal["image", "video"]
KINDS: tuple[Kind, ...] = ("image", "video")
DROP_CALLER = "inbox"  # dropped files have no API caller: they share one queue of their own


class Pool(msgspec.Struct, kw_only=True):
    """One endpoint kind's slots (item ``pk = POOL#<kind>``)."""

    kind: Kind
    in_use: int = 0
    capacity: int = 0
    instances: int = 0
    per_instance: int = 1
    capacity_at: str | None = None
    endpoint: str | None = None
    waiting: int = 0
    queued: dict[str, int] = msgspec.field(default_factory=dict)  # caller key -> its waiting entries
    served: dict[str, str] = msgspec.field(default_factory=dict)  # caller key -> ISO time of its last grant

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.in_use)

    def callers_waiting(self) -> list[str]:
        return sorted(key for key, count in self.queued.items() if count > 0)


class WaitingEntry(msgspec.Struct, kw_only=True):
    """A job parked in a ``.waitForTaskToken`` state until a slot is granted (item ``pk = WAIT#<kind>``)."""

    kind: Kind
    sk: str  # <caller key>#<order time>#<job id>: the order time is the job's acceptance for its first slot
    job_id: str
    caller_key: str
    task_token: str
    enqueued_at: str
    deadline: str | None = None  # when the job's max_queue_seconds ends (first admission only)


class Holder(msgspec.Struct, kw_only=True):
    """A job holding one slot of a pool (item ``pk = HOLD#<kind>, sk = <job id>``): the source of truth for who holds
    what; the pool's ``in_use`` counts them (and the healing schedule re-counts)."""

    kind: Kind
    job_id: str
    granted_at: str
    task_token: str | None = None  # a grant to a waiting job: the token its grant answered (the healer answers it
    # again if the dispatcher died between the grant and SendTaskSuccess); None for the stage's own fast-path take


def caller_key(owner: str | None) -> str:
    """A fixed-width key for a caller scope (unique ids may hold characters the sort key uses as separators)."""
    return hashlib.sha256((owner or DROP_CALLER).encode()).hexdigest()[:20]


def entry_key(key: str, order_at: str, job_id: str) -> str:
    return f"{key}#{order_at}#{job_id}"


def capacity_of(kind: Kind, instances: int, per_instance: int) -> int:
    """Slots of an endpoint: instances x per-instance concurrency. An async endpoint at zero instances keeps one
    instance's worth (a bounded backlog in SageMaker's queue: its HasBacklogWithoutCapacity alarm scales from zero);
    a real-time endpoint at zero serves nothing."""
    if kind == "video":
        return max(1, instances) * per_instance
    return max(0, instances) * per_instance


def next_callers(pool: Pool) -> list[str]:
    """Callers with waiting work, least recently served first (never served: first); ties are broken by the caller
    whose oldest entry waited longest (``gate.dispatch`` reads those heads)."""
    return sorted(pool.callers_waiting(), key=lambda key: pool.served.get(key, ""))
