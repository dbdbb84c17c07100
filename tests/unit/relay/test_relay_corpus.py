"""The relay against the bad-input corpus (tests/corpus/relay/cases.json): one test per case.

Every case runs next to a bystander session on the same relay, which must still speak afterwards: a bad client
never hurts the others. Waits are bounded; a case either gets the documented error event / close code or fails.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.corpus import expand, params
from tests.support.relay.relay_harness import CONFIG, TOKEN, open_client, relay_stack, run, url_of

BYSTANDER = {**CONFIG, "voice": "Bystander"}
WAIT = 5.0


def _frame(spec: dict[str, Any]) -> str | bytes:
    if "json" in spec:
        return expand(json.dumps(spec["json"]))
    if "binary_hex" in spec:
        return bytes.fromhex(spec["binary_hex"])
    return expand(spec["text"])


def _connect_kwargs(mode: str) -> tuple[str, dict[str, Any]]:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    return {
        "header": ("", {"additional_headers": bearer}),
        "none": ("", {}),
        "wrong": ("", {"additional_headers": {"Authorization": "Bearer not-the-token-0123456789"}}),
        "basic": ("", {"additional_headers": {"Authorization": f"Basic {TOKEN}"}}),
        "empty-bearer": ("", {"additional_headers": {"Authorization": "Bearer "}}),
        "subprotocol-wrong": ("", {"subprotocols": ["omnireel.v1", "omnireel.bearer.wrong-token"]}),
        "query": (f"?token={TOKEN}", {}),
    }[mode]


async def _bystander_speaks(ws, label: str) -> None:  # type: ignore[no-untyped-def]
    await ws.send(json.dumps({"type": "input.text", "text": f"bystander {label}"}))
    await ws.send(json.dumps({"type": "input.done", "who": "bystander"}))
    async with asyncio.timeout(WAIT):
        while True:
            frame = await ws.recv()
            if isinstance(frame, str):
                kind = json.loads(frame)["type"]
                assert kind != "error", frame
                if kind == "session.done":
                    return


async def _collect(ws, probe: bool) -> tuple[list[dict[str, Any]], int | None, str | None]:  # type: ignore[no-untyped-def]
    """Read (bounded) until the probe utterance's session.done, or until the relay closes the connection."""
    if probe:
        await ws.send(json.dumps({"type": "input.text", "text": "probe"}))
        await ws.send(json.dumps({"type": "input.done"}))
    received: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(WAIT):
            while True:
                frame = await ws.recv()
                if isinstance(frame, str):
                    event = json.loads(frame)
                    received.append(event)
                    if probe and event["type"] == "session.done" and "probe" in _spoken(received):
                        return received, None, None
    except ConnectionClosed:
        pass
    return received, ws.close_code, ws.close_reason


def _spoken(events: list[dict[str, Any]]) -> str:
    return " ".join(str(e.get("sentence_text", "")) for e in events if e["type"] == "audio.start")


def _codes(events: list[dict[str, Any]]) -> list[str]:
    return [e.get("code", "upstream") for e in events if e["type"] == "error"]


@pytest.mark.parametrize("case", params("relay"))
def test_relay_case(case: dict[str, Any]) -> None:
    expect = case["expect"]

    async def main() -> None:
        async with relay_stack(**{"max_sessions": 4, **case.get("settings", {})}) as (server, fake):
            bystander = await open_client(server)
            await bystander.send(json.dumps(BYSTANDER))
            await _bystander_speaks(bystander, "before")

            if "http" in expect:
                query, kwargs = _connect_kwargs(case.get("connect", "header"))
                url = url_of(server, case.get("path", "/v1/audio/speech/stream")) + query
                with pytest.raises(InvalidStatus) as info:
                    await connect(url, open_timeout=WAIT, **kwargs)
                assert info.value.response.status_code == expect["http"]
                assert fake.connections == 1, "no upstream stream for a refused client"
            else:
                ws = await open_client(server, max_size=None)
                for spec in case.get("send", []):
                    await ws.send(_frame(spec))
                if "flood" in case:
                    frame = _frame(case["flood"])
                    for _ in range(case["flood"].get("count", expect.get("count", 0))):
                        await ws.send(frame)
                for spec in case.get("after", []):
                    await ws.send(_frame(spec))
                if expect.get("flood"):
                    await _check_flood(ws, expect)
                else:
                    events, code, reason = await _collect(ws, probe=expect.get("alive", False))
                    assert _codes(events) == expect["errors"], events[-5:]
                    if "message" in expect:
                        assert any(expect["message"] in e["message"] for e in events if e["type"] == "error")
                    if expect.get("alive"):
                        assert code is None, f"closed {code} {reason}"
                    else:
                        assert code == expect["close"], (code, reason)
                        assert expect.get("reason", "") in (reason or "")
                forwarded = [m for m in fake.received if "ystander" not in m]
                for text in [expect.get("forwarded_contains")] if expect.get("forwarded_contains") else []:
                    assert any(text in m for m in forwarded)
                if "forwarded_counts" in expect:
                    counts = Counter(json.loads(m)["type"] for m in forwarded)
                    for kind, n in expect["forwarded_counts"].items():
                        assert counts[kind] == n + (kind == "input.text"), counts  # + the probe's input.text
                await ws.close()

            await _bystander_speaks(bystander, "after")  # the relay stayed healthy for the others
            # Every session of the case, closed ones included (the probed one has usually closed by now).
            assert len(server.sessions.ever) >= (1 if "http" in expect else 2)  # the bystander (+ the client)
            assert all(s.max_queued_frames <= server.settings.send_queue_frames for s in server.sessions.ever)
            await bystander.close()

    run(main(), timeout=30)


async def _check_flood(ws, expect: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    """Bounded: either every flooded frame is answered, or the relay closed the client with an allowed code."""
    answered = 0
    try:
        async with asyncio.timeout(15):
            while answered < expect["count"]:
                frame = await ws.recv()
                if isinstance(frame, str):
                    event = json.loads(frame)
                    answered += event.get("code") == expect["code"] or event["type"] == expect["code"]
    except ConnectionClosed:
        assert ws.close_code in expect["close_or_all"], (ws.close_code, ws.close_reason)
        return
    assert answered == expect["count"]
