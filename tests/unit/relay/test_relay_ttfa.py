"""Time to first audio as the relay measures it (log line, EMF, Prometheus) equals what the client sees, whatever
came before in the session; the bookkeeping behind it stays bounded (issue 10, item 4)."""

from __future__ import annotations

import asyncio
import json
import time

from tests.support.relay.fake_tts_upstream import FakeTTS
from tests.support.relay.relay_harness import CONFIG, open_client, relay_stack, run


async def _until(ws, kind: str, count: int = 1) -> list[str | bytes]:  # type: ignore[no-untyped-def]
    """Frames up to the ``count``-th ``kind`` event; notes when the first binary frame arrived in ``_until.first``."""
    frames: list[str | bytes] = []
    seen = 0
    _until.first = None  # type: ignore[attr-defined]
    async with asyncio.timeout(10):
        while seen < count:
            frame = await ws.recv()
            if isinstance(frame, bytes) and _until.first is None:  # type: ignore[attr-defined]
                _until.first = time.monotonic()  # type: ignore[attr-defined]
            frames.append(frame)
            if isinstance(frame, str) and json.loads(frame)["type"] == kind:
                seen += 1
    return frames


def test_ttfa_after_fifty_empty_flushes_is_the_one_the_client_saw() -> None:
    async def main() -> None:
        async with relay_stack(FakeTTS(first_chunk_delay=0.1)) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            for _ in range(50):
                await ws.send(json.dumps({"type": "input.done"}))
            answers = await _until(ws, "session.done", 50)
            assert [json.loads(f)["total_sentences"] for f in answers] == [0] * 50
            await asyncio.sleep(0.5)  # time passes before the real utterance (not a synchronisation)
            await ws.send(json.dumps({"type": "input.text", "text": "now for real"}))
            t0 = time.monotonic()
            await ws.send(json.dumps({"type": "input.done"}))
            await _until(ws, "session.done")
            client_ttfa = _until.first - t0  # type: ignore[attr-defined]
            (session,) = server.sessions
            assert len(session.ttfa_ms) == 1, session.ttfa_ms
            relay_ttfa = session.ttfa_ms[0] / 1000
            assert 0.1 <= relay_ttfa <= client_ttfa + 0.005, (relay_ttfa, client_ttfa)
            assert relay_ttfa < 0.45, relay_ttfa  # not counted from the empty flushes 0.5 s earlier
            assert server.metrics.ttfa.n == 1 and server.metrics.ttfa.total < 0.45
            await ws.close()

    run(main())


def test_events_behind_a_stuck_utterance_are_held_bounded() -> None:
    """While an utterance is in flight upstream the relay forwards nothing more (held, in order); a client that
    piles up more than ``max_held_events`` gets an error and 1008, nothing grows without bound."""
    from tests.support.relay.relay_harness import frames_until_closed

    async def main() -> None:
        async with relay_stack(upstream_progress_timeout=30, max_held_events=300) as (server, fake):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "STALL"}))
            await ws.send(json.dumps({"type": "input.done"}))
            await _until(ws, "audio.start")
            for _ in range(250):  # never answered: the fake is stuck in the STALL utterance
                await ws.send(json.dumps({"type": "input.done"}))
            (session,) = server.sessions
            async with asyncio.timeout(10):
                while len(session._held) < 250:
                    await asyncio.sleep(0.01)
            assert session._utterances.flushes == 1 and session._utterances.pending == 0
            assert [json.loads(m)["type"] for m in fake.received][-1] == "input.done"
            assert len(fake.received) == 3  # config, text, done: the 250 stayed in the relay
            for _ in range(60):
                await ws.send(json.dumps({"type": "input.done"}))
            frames = await frames_until_closed(ws, timeout=10)
            err = json.loads(frames[-1])
            assert err["code"] == "too_far_ahead" and ws.close_code == 1008

    run(main())


def test_tracker_pairs_by_utterance_index_not_by_arrival() -> None:
    from omnireel_relay.utterances import UtteranceTracker

    tracker = UtteranceTracker(max_pending=4)
    for t in (1.0, 2.0, 3.0):
        tracker.flushed(now=t)
    tracker.session_done({"type": "session.done", "utterance_index": 0, "total_sentences": 0})  # empty flush
    assert tracker.in_flight and tracker.pending == 2
    assert tracker.audio_started({"type": "audio.start", "utterance_index": 1, "sentence_index": 0}) == 2.0
    tracker.session_done({"type": "session.done", "utterance_index": 2, "total_sentences": 1})  # 1 and 2 answered
    assert not tracker.in_flight and tracker.pending == 0
    for t in range(10):
        tracker.flushed(now=float(t))
    assert tracker.pending == 4 and tracker.unmeasured == 6
