"""Protocol conformance through the relay against a fake upstream that streams PCM progressively."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request

from tests.support.relay.fake_tts_upstream import FakeTTS
from tests.support.relay.relay_harness import CONFIG, TOKEN, events, open_client, relay_stack, run, speak


def test_event_order_sample_rate_total_bytes_and_several_utterances_per_socket() -> None:
    async def main() -> None:
        async with relay_stack(FakeTTS(chunks=6)) as (server, fake):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            seqs: list[int] = []
            for n, text in enumerate(["Hello there.", "Second utterance.", "Third."]):
                frames = await speak(ws, text)
                kinds = events(frames)
                assert kinds[0] == "audio.start"
                assert kinds[-2:] == ["audio.done", "session.done"]
                assert set(kinds[1:-2]) == {"pcm"} and len(kinds) == 6 + 3
                start = json.loads(frames[0])
                assert start["sample_rate"] == 24000
                assert start["utterance_index"] == n and start["format"] == "pcm"
                pcm = [f for f in frames if isinstance(f, bytes)]
                done = json.loads(frames[-2])
                assert done["total_bytes"] == sum(len(p) for p in pcm)
                assert all(len(p) % 2 == 0 for p in pcm)  # PCM16: whole samples, not re-chunked
                assert json.loads(frames[-1])["utterance_index"] == n
                seqs += [struct.unpack_from("<I", p)[0] for p in pcm]
            assert seqs == list(range(len(seqs)))  # nothing dropped or reordered
            await ws.send(json.dumps({"type": "session.close"}))
            await ws.wait_closed()
            assert ws.close_code == 1000
            # the relay forwarded the client's events unchanged, in order, over ONE upstream connection
            assert fake.connections == 1
            assert [json.loads(m)["type"] for m in fake.received] == [
                "session.config",
                *["input.text", "input.done"] * 3,
                "session.close",
            ]
            assert json.loads(fake.received[0]) == CONFIG

    run(main())


def test_pcm_frames_arrive_before_audio_done_progressively() -> None:
    """Audio is relayed as produced: the first chunk reaches the client long before synthesis ends."""

    async def main() -> None:
        import time

        async with relay_stack(FakeTTS(chunks=5, interval=0.2)) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "slow"}))
            t0 = time.monotonic()
            await ws.send(json.dumps({"type": "input.done"}))
            assert json.loads(await ws.recv())["type"] == "audio.start"
            first = await ws.recv()
            t_first = time.monotonic() - t0
            assert isinstance(first, bytes)
            rest = []
            while True:
                f = await ws.recv()
                rest.append(f)
                if isinstance(f, str) and json.loads(f)["type"] == "session.done":
                    break
            t_all = time.monotonic() - t0
            assert t_first < 0.15 < 0.7 < t_all
            await ws.close()

    run(main())


def test_upstream_error_event_is_forwarded_and_session_survives() -> None:
    async def main() -> None:
        async with relay_stack() as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            frames = await speak(ws, "MODELERR please")
            assert events(frames) == ["error"]
            assert json.loads(frames[0])["message"] == "model failed on this text"
            frames = await speak(ws, "fine now")
            assert events(frames)[0] == "audio.start" and events(frames)[-1] == "session.done"
            await ws.close()

    run(main())


def test_healthz_metrics_and_index_page() -> None:
    async def main() -> None:
        import asyncio

        async with relay_stack() as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await speak(ws, "measure me")
            base = f"http://127.0.0.1:{server.port}"

            def get(path: str, token: str | None = None) -> tuple[int, str, str]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                request = urllib.request.Request(base + path, headers=headers)  # noqa: S310 - loopback test
                try:
                    with urllib.request.urlopen(request, timeout=5) as r:  # noqa: S310 - loopback test
                        return r.status, r.headers["Content-Type"], r.read().decode()
                except urllib.error.HTTPError as e:
                    return e.code, e.headers["Content-Type"], e.read().decode()

            status, _, body = await asyncio.to_thread(get, "/healthz")  # open: the ALB health check has no token
            assert status == 200 and json.loads(body)["status"] == "ok"
            for token in (None, "wrong-token-0123456789"):  # /metrics is not public
                status, _, body = await asyncio.to_thread(get, "/metrics", token)
                assert status == 401 and "omnireel_relay" not in body
            status, ctype, body = await asyncio.to_thread(get, "/metrics", TOKEN)
            assert status == 200 and ctype.startswith("text/plain")
            assert "omnireel_relay_active_sessions 1" in body
            assert "omnireel_relay_time_to_first_audio_seconds_count 1" in body
            assert "omnireel_relay_audio_chunks_total 5" in body
            assert "omnireel_relay_audio_bytes_total 24000" in body
            status, ctype, body = await asyncio.to_thread(get, "/")
            assert status == 200 and ctype.startswith("text/html")
            assert "AudioContext" in body and "omnireel.bearer." in body
            await ws.close()

    run(main())


def test_metrics_can_be_made_public_explicitly() -> None:
    async def main() -> None:
        import asyncio

        async with relay_stack(metrics_public=True) as (server, _):

            def get() -> int:
                url = f"http://127.0.0.1:{server.port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as r:
                    return r.status

            assert await asyncio.to_thread(get) == 200

    run(main())
