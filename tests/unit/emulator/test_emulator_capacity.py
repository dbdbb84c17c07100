"""Issue 34 item 9: the container emulator runs at most concurrency_per_instance x instances generation requests of a
route kind at once; the others wait in the "container", first come first served (emulator/capacity.py).

The gate itself is driven step by step on an event loop (no timing); the routes through the ASGI app with a short
model latency, waiting (bounded) until the stats show the queue."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from emulator_testkit import pipeline_fields, post_multipart

from omnireel_local.emulator import EmulatorConfig, images, videos
from omnireel_local.emulator.capacity import CapacityGate, ClientGone
from omnireel_local.emulator.config import INSTANCE_COUNT_HEADER

IMG = {"prompt": "p", "size": "32x32", "seed": 1}
WAIT_S = 20.0


class FakeRequest:
    """What the gate reads of a request: its headers, and ``receive`` (which answers http.disconnect once gone)."""

    def __init__(self, instances: int | None = None) -> None:
        self.headers = {} if instances is None else {INSTANCE_COUNT_HEADER: str(instances)}
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _hold(gate: CapacityGate, request: Any, release: asyncio.Event, order: list[int], index: int) -> None:
    async with gate.slot("images", 1, request):
        order.append(index)
        await release.wait()


def test_n_plus_one_requests_with_capacity_n_one_waits_and_starts_when_a_slot_frees() -> None:
    async def scenario() -> None:
        gate = CapacityGate()
        releases = [asyncio.Event() for _ in range(4)]
        order: list[int] = []
        tasks = [asyncio.create_task(_hold(gate, FakeRequest(instances=3), releases[i], order, i)) for i in range(4)]
        await _settle()
        stats = gate.stats()["images"]
        assert (stats["capacity"], stats["in_flight"], stats["waiting"]) == (3, 3, 1)
        assert order == [0, 1, 2]  # the fourth waits
        releases[1].set()
        await _settle()
        assert order == [0, 1, 2, 3]  # it starts when a slot frees, not before
        for release in releases:
            release.set()
        await asyncio.gather(*tasks)
        stats = gate.stats()["images"]
        assert stats["peak_in_flight"] == 3 and stats["peak_waiting"] == 1
        assert (stats["in_flight"], stats["waiting"], stats["started"], stats["waited"]) == (0, 0, 4, 1)

    asyncio.run(scenario())


def test_waiting_requests_start_first_come_first_served() -> None:
    async def scenario() -> None:
        gate = CapacityGate()
        release = asyncio.Event()
        order: list[int] = []
        first = asyncio.create_task(_hold(gate, FakeRequest(), release, order, 0))
        await _settle()
        later_releases = [asyncio.Event() for _ in range(3)]
        waiters = []
        for i in range(3):
            waiters.append(asyncio.create_task(_hold(gate, FakeRequest(), later_releases[i], order, i + 1)))
            await _settle()
        release.set()
        for event in later_releases:
            await _settle()
            event.set()
        await asyncio.gather(first, *waiters)
        assert order == [0, 1, 2, 3]
        assert gate.stats()["images"]["peak_waiting"] == 3

    asyncio.run(scenario())


def test_more_instances_start_waiting_requests_at_once() -> None:
    """The hosting sends the variant's current instance count with every request: a scale-out takes effect on the next
    request (UpdateEndpointWeightsAndCapacities), and requests already waiting start then."""

    async def scenario() -> None:
        gate = CapacityGate()
        release = asyncio.Event()
        order: list[int] = []
        tasks = [asyncio.create_task(_hold(gate, FakeRequest(instances=1), release, order, i)) for i in range(3)]
        await _settle()
        assert order == [0]
        tasks.append(asyncio.create_task(_hold(gate, FakeRequest(instances=4), release, order, 3)))
        await _settle()
        assert sorted(order) == [0, 1, 2, 3]
        assert gate.stats()["images"]["capacity"] == 4
        release.set()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())


def test_a_waiting_request_whose_caller_left_is_never_started() -> None:
    async def scenario() -> None:
        gate = CapacityGate()
        release = asyncio.Event()
        order: list[int] = []
        running = asyncio.create_task(_hold(gate, FakeRequest(), release, order, 0))
        await _settle()
        leaving, staying = FakeRequest(), FakeRequest()
        left = asyncio.create_task(_hold(gate, leaving, release, order, 1))
        await _settle()
        stays = asyncio.create_task(_hold(gate, staying, release, order, 2))
        await _settle()
        leaving.gone.set()  # the hosting's 60 s ran out: it closed the connection
        with pytest.raises(ClientGone):
            await left
        assert gate.stats()["images"]["waiting"] == 1
        release.set()
        await asyncio.gather(running, stays)
        assert order == [0, 2]  # the abandoned request was never rendered
        stats = gate.stats()["images"]
        assert (stats["abandoned"], stats["started"], stats["in_flight"]) == (1, 2, 0)

    asyncio.run(scenario())


def test_a_cancelled_waiter_leaves_the_queue_and_leaks_no_slot() -> None:
    async def scenario() -> None:
        gate = CapacityGate()
        release = asyncio.Event()
        order: list[int] = []
        running = asyncio.create_task(_hold(gate, FakeRequest(), release, order, 0))
        await _settle()
        waiter = asyncio.create_task(_hold(gate, FakeRequest(), release, order, 1))
        await _settle()
        waiter.cancel()  # e.g. the video route's own server-side timeout
        await _settle()
        release.set()
        await running
        assert waiter.cancelled() and order == [0]
        stats = gate.stats()["images"]
        assert (stats["in_flight"], stats["waiting"]) == (0, 0)

    asyncio.run(scenario())


# ------------------------------------------------------------------------------------------------ through the routes


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The routes' model time (``apply_http_faults``, run inside the slot) lasts until the test sets the event: the
    slots' state the test waits for holds until it looked, however late its poll runs. (A fixed latency made it a
    race: on a busy machine the poll could miss the second the requests overlapped, or the requests not overlap.)
    Bounded: a test that fails before it sets the event still has its requests end ``WAIT_S`` after it began (its
    thread pool waits for them before the fixture's teardown can set it)."""
    release = threading.Event()
    deadline = time.monotonic() + WAIT_S

    def holding(original: Callable[..., Any]) -> Callable[..., Any]:
        async def apply(*args: Any) -> None:
            while not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await original(*args)

        return apply

    for module in (images, videos):
        monkeypatch.setattr(module, "apply_http_faults", holding(module.apply_http_faults))
    yield release
    release.set()


def _wait_for_stats(client: Any, kind: str, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        stats = client.get("/_emulator/stats").json()["concurrency"][kind]
        if predicate(stats):
            return stats
        assert time.monotonic() < deadline, f"emulator stats never matched: {stats}"
        time.sleep(0.02)


def test_the_image_route_serves_one_request_per_instance_and_queues_the_next(make_client: Any, held: Any) -> None:
    client = make_client()
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(client.post, "/v1/images/generations", json=IMG) for _ in range(2)]
        stats = _wait_for_stats(client, "images", lambda s: s["waiting"] == 1)
        assert stats["in_flight"] == 1 and stats["capacity"] == 1
        held.set()
        assert [f.result(timeout=WAIT_S).status_code for f in futures] == [200, 200]
    stats = client.get("/_emulator/stats").json()["concurrency"]["images"]
    assert (stats["peak_in_flight"], stats["peak_waiting"], stats["in_flight"]) == (1, 1, 0)
    reset = client.delete("/_emulator/stats").json()["concurrency"]["images"]
    assert (reset["peak_in_flight"], reset["peak_waiting"], reset["started"]) == (0, 0, 0)


def test_the_instance_count_header_multiplies_the_per_instance_concurrency(make_client: Any, held: Any) -> None:
    client = make_client(concurrency_per_instance=2)
    headers = {INSTANCE_COUNT_HEADER: "2"}
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = [pool.submit(client.post, "/v1/images/generations", json=IMG, headers=headers) for _ in range(5)]
        stats = _wait_for_stats(client, "images", lambda s: s["in_flight"] + s["waiting"] == 5)
        assert (stats["capacity"], stats["in_flight"], stats["waiting"]) == (4, 4, 1)
        held.set()
        assert all(f.result(timeout=WAIT_S).status_code == 200 for f in futures)


def test_a_throttle_answers_at_once_without_a_slot(make_client: Any) -> None:
    client = make_client(faults={"images": {"throttle_rate": 1}})
    assert client.post("/v1/images/generations", json=IMG).status_code == 429
    assert client.get("/_emulator/stats").json()["concurrency"]["images"]["started"] == 0


def test_the_video_sync_route_is_gated_on_the_video_pool(make_client: Any, held: Any) -> None:
    client = make_client()
    fields = pipeline_fields(width="64", height="48", num_frames="3")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(post_multipart, client, "/v1/videos/sync", fields) for _ in range(2)]
        _wait_for_stats(client, "videos", lambda s: s["waiting"] == 1)
        held.set()
        assert [f.result(timeout=WAIT_S).status_code for f in futures] == [200, 200]
    stats = client.get("/_emulator/stats").json()["concurrency"]
    assert stats["videos"]["peak_in_flight"] == 1 and stats["images"]["started"] == 0


def test_concurrency_per_instance_comes_from_the_environment() -> None:
    env = {"OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE": "3"}
    assert EmulatorConfig.from_env(env).concurrency_per_instance == 3
    assert EmulatorConfig.from_env({}).concurrency_per_instance == 1
