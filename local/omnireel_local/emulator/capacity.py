"""The container's own concurrency limit: at most ``concurrency_per_instance`` x instances generation requests of one
route kind run at once; the others wait in the container, first come first served.

A diffusion pipeline denoises one request at a time on its GPU (``docs/capacity.md``): a real vLLM-Omni container
behind a real-time endpoint takes more connections than it can serve, and the extra requests wait inside it while
InvokeEndpoint's 60 s clock (wait + work) runs. The emulator does the same, so the local stack cannot run more models
at once than the endpoint has capacity for, and a caller that sends more sees what it would see on AWS: waits, then
ModelError 408 once a request cannot finish within 60 s (``sagemaker_hosting.REALTIME_TIMEOUT_S``).

One emulator process plays every instance of its endpoint's production variant: the local SageMaker hosting says how
many there are now (``INSTANCE_COUNT_HEADER``, the variant's current instance count, on every invocation), so the
capacity follows ``UpdateEndpointWeightsAndCapacities``. A request without the header (a direct call to the emulator)
counts one instance. The pooled wait behaves like SageMaker's ``LEAST_OUTSTANDING_REQUESTS`` routing: a request waits
only while every instance is busy (with ``RANDOM`` routing AWS may queue it on a busy instance while another is idle).

A waiting request whose caller has gone away (the hosting gave up after 60 s) leaves the queue without being rendered;
a running one runs to its end and holds its slot until then (a hung request keeps its instance busy, as on AWS).

``GET /_emulator/stats`` reports, per gated route kind, the requests in flight now, the peak in flight, the peak
waiting and the capacity last seen (``DELETE /_emulator/stats`` resets the peaks to the current values).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from .config import INSTANCE_COUNT_HEADER, RouteKind
from .errors import EmulatorError

# INSTANCE_COUNT_HEADER is set by the local SageMaker hosting on its own requests to the container only: never taken
# from an InvokeEndpoint caller (the hosting forwards Content-Type, Accept and X-Amzn-SageMaker-* only).
GATED_KINDS: tuple[RouteKind, ...] = ("images", "videos")
MAX_INSTANCES = 1000


def instances_of(request: Request) -> int:
    """The endpoint variant's instance count the hosting sent (1 without a valid header; at least 1)."""
    raw = request.headers.get(INSTANCE_COUNT_HEADER, "")
    try:
        return min(max(int(raw), 1), MAX_INSTANCES)
    except ValueError:
        return 1


class ClientGone(EmulatorError):
    """The caller closed the connection while its request waited for a slot: nothing was rendered."""

    def __init__(self, kind: str) -> None:
        super().__init__(408, f"The client went away while the {kind} request waited for the container (not started)")


@dataclass
class _Pool:
    capacity: int = 1
    in_flight: int = 0
    peak_in_flight: int = 0
    peak_waiting: int = 0
    started: int = 0  # requests that got a slot
    waited: int = 0  # of which had to wait for it
    abandoned: int = 0  # left the queue because their caller went away
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)

    def as_dict(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "in_flight": self.in_flight,
            "waiting": len(self.waiting),
            "peak_in_flight": self.peak_in_flight,
            "peak_waiting": self.peak_waiting,
            "started": self.started,
            "waited": self.waited,
            "abandoned": self.abandoned,
        }


class CapacityGate:
    """Per route kind: a FIFO of waiting requests in front of ``capacity`` slots. Used on the app's event loop only."""

    def __init__(self) -> None:
        self._pools: dict[str, _Pool] = {kind: _Pool() for kind in GATED_KINDS}

    @asynccontextmanager
    async def slot(self, kind: RouteKind, per_instance: int, request: Request) -> AsyncIterator[None]:
        """Hold one of ``per_instance`` x instances slots of ``kind`` for the block (waiting for it first if needed)."""
        pool = self._pools[kind]
        pool.capacity = per_instance * instances_of(request)
        self._grant(pool)  # a capacity that grew starts waiting requests now
        if pool.in_flight < pool.capacity and not pool.waiting:
            self._start(pool)
        else:
            await self._wait(kind, pool, request)
        try:
            yield
        finally:
            pool.in_flight -= 1
            self._grant(pool)

    def stats(self) -> dict[str, Any]:
        return {kind: pool.as_dict() for kind, pool in self._pools.items()}

    def reset(self) -> None:
        for pool in self._pools.values():
            pool.peak_in_flight, pool.peak_waiting = pool.in_flight, len(pool.waiting)
            pool.started = pool.waited = pool.abandoned = 0

    @staticmethod
    def _start(pool: _Pool) -> None:
        pool.in_flight += 1
        pool.started += 1
        pool.peak_in_flight = max(pool.peak_in_flight, pool.in_flight)

    def _grant(self, pool: _Pool) -> None:
        while pool.waiting and pool.in_flight < pool.capacity:
            future = pool.waiting.popleft()
            if future.done():  # cancelled: its caller is gone
                continue
            self._start(pool)
            future.set_result(None)

    async def _wait(self, kind: str, pool: _Pool, request: Request) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pool.waiting.append(future)
        pool.waited += 1
        pool.peak_waiting = max(pool.peak_waiting, len(pool.waiting))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({future, gone}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._leave(pool, future)
            raise
        finally:
            gone.cancel()
        if not future.done():
            self._leave(pool, future)
            pool.abandoned += 1
            raise ClientGone(kind)

    def _leave(self, pool: _Pool, future: asyncio.Future[None]) -> None:
        if future.done() and not future.cancelled():  # granted meanwhile: give the slot on
            pool.in_flight -= 1
            self._grant(pool)
            return
        future.cancel()
        if future in pool.waiting:
            pool.waiting.remove(future)


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read: the server's next message is that)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
