from __future__ import annotations

import io
import json
import time
import wave

import pytest
from emulator_testkit import assert_error_shape
from starlette.websockets import WebSocketDisconnect

WS = "/v1/audio/speech/stream"
PCM_CONFIG = {
    "type": "session.config",
    "voice": "Vivian",
    "language": "English",
    "response_format": "pcm",
    "stream_audio": True,
}


def utterance(ws, text: str) -> tuple[list[dict], list[bytes], list[str]]:
    """Send one utterance; collect events and binary frames until session.done. Returns (events, frames, order)."""
    ws.send_text(json.dumps({"type": "input.text", "text": text}))
    ws.send_text(json.dumps({"type": "input.done"}))
    events, frames, order = [], [], []
    for _ in range(10_000):
        message = ws.receive()
        if message.get("bytes") is not None:
            frames.append(message["bytes"])
            order.append("binary")
            continue
        event = json.loads(message["text"])
        events.append(event)
        order.append(event["type"])
        if event["type"] == "session.done":
            break
    return events, frames, order


def test_streamed_pcm_event_order_and_bytes(make_client):
    client = make_client(speech_chunk_ms=80)
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps(PCM_CONFIG))
        events, frames, order = utterance(ws, "Hello there, this is the emulator speaking.")
        start, done, session_done = events
        assert start == {
            "type": "audio.start",
            "utterance_index": 0,
            "sentence_index": 0,
            "sentence_text": "Hello there, this is the emulator speaking.",
            "format": "pcm",
            "sample_rate": 24000,
            "channels": 1,
        }
        assert order[0] == "audio.start" and order[-2:] == ["audio.done", "session.done"]
        assert set(order[1:-2]) == {"binary"} and len(frames) > 1
        assert done == {
            "type": "audio.done",
            "utterance_index": 0,
            "sentence_index": 0,
            "total_bytes": done["total_bytes"],
            "error": False,
        }
        assert done["total_bytes"] == sum(len(f) for f in frames)
        assert all(len(f) % 2 == 0 for f in frames)
        assert max(len(f) for f in frames) == 24000 * 80 // 1000 * 2
        # ~70 ms per character of PCM16 at 24 kHz
        seconds = done["total_bytes"] / 2 / 24000
        assert 0.05 * 43 < seconds < 0.1 * 43
        assert session_done == {"type": "session.done", "utterance_index": 0, "total_sentences": 1}

        events2, frames2, _ = utterance(ws, "Second one.")
        assert events2[0]["utterance_index"] == 1 and events2[-1]["utterance_index"] == 1
        assert events2[1]["total_bytes"] == sum(len(f) for f in frames2)
        assert sum(len(f) for f in frames2) < sum(len(f) for f in frames)  # shorter text, shorter audio

        ws.send_text(json.dumps({"type": "session.close"}))
        with pytest.raises(WebSocketDisconnect) as info:
            ws.receive_text()
        assert info.value.code == 1000


def test_audio_is_deterministic_from_text(client):
    results = []
    for _ in range(2):
        with client.websocket_connect(WS) as ws:
            ws.send_text(json.dumps(PCM_CONFIG))
            results.append(b"".join(utterance(ws, "Same words.")[1]))
    assert results[0] == results[1] and len(set(results[0])) > 10


def test_pcm_is_paced_progressively(make_client):
    client = make_client(speech_realtime_factor=10.0, speech_chunk_ms=80)
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps(PCM_CONFIG))
        ws.send_text(json.dumps({"type": "input.text", "text": "x" * 30}))  # ~2.1 s of audio -> ~0.21 s at 10x
        ws.send_text(json.dumps({"type": "input.done"}))
        assert json.loads(ws.receive_text())["type"] == "audio.start"
        arrivals = []
        while True:
            message = ws.receive()
            if message.get("bytes") is None:
                assert json.loads(message["text"])["type"] == "audio.done"
                break
            arrivals.append(time.perf_counter())
    assert len(arrivals) > 10
    assert arrivals[-1] - arrivals[0] > 0.1  # spread out in time, not one burst


def test_default_wav_is_one_binary_frame(client):
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps({"type": "session.config", "voice": "vivian"}))
        events, frames, order = utterance(ws, "Hi.")
    assert order == ["audio.start", "binary", "audio.done", "session.done"]
    assert "sample_rate" not in events[0] and events[0]["format"] == "wav"
    assert events[1]["total_bytes"] == len(frames[0])
    with wave.open(io.BytesIO(frames[0])) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        assert wav.getnframes() > 0


def test_config_timeout(make_client):
    client = make_client(ws_config_timeout_s=0.2)
    with client.websocket_connect(WS) as ws:
        event = json.loads(ws.receive_text())
        assert event["type"] == "error" and "session.config" in event["message"]
        with pytest.raises(WebSocketDisconnect):
            ws.receive_text()


def test_idle_timeout(make_client):
    client = make_client(ws_idle_timeout_s=0.2)
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps(PCM_CONFIG))
        event = json.loads(ws.receive_text())
        assert event["type"] == "error" and "idle" in event["message"]
        with pytest.raises(WebSocketDisconnect):
            ws.receive_text()


def test_errors_after_config_are_survivable(client):
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps(PCM_CONFIG))
        ws.send_text("not json")
        assert "Invalid JSON" in json.loads(ws.receive_text())["message"]
        ws.send_text("[1, 2]")
        assert "JSON object" in json.loads(ws.receive_text())["message"]
        ws.send_bytes(b"\x00\x01")
        assert "Binary" in json.loads(ws.receive_text())["message"]
        ws.send_text(json.dumps({"type": "input.text", "text": "x" * (128 * 1024 + 1)}))
        assert "too large" in json.loads(ws.receive_text())["message"]
        ws.send_text(json.dumps({"type": "nope"}))
        assert "Unknown message type" in json.loads(ws.receive_text())["message"]
        ws.send_text(json.dumps({"type": "input.done"}))  # an empty flush: answered like vLLM-Omni 0.26.0
        assert json.loads(ws.receive_text()) == {"type": "session.done", "utterance_index": 0, "total_sentences": 0}
        ws.send_text(json.dumps({"type": "input.text", "text": "buffered"}))
        ws.send_text(json.dumps(PCM_CONFIG))
        assert "buffered" in json.loads(ws.receive_text())["message"]
        events, frames, _ = utterance(ws, " and more")
        assert events[0]["sentence_text"] == "buffered and more"
        assert events[0]["utterance_index"] == events[-1]["utterance_index"] == 1  # the empty flush counted
        assert events[1]["total_bytes"] == sum(len(f) for f in frames) > 0


@pytest.mark.parametrize(
    ("first", "message"),
    [
        ("not json", "Invalid JSON"),
        (json.dumps({"type": "input.text", "text": "hi"}), "session.config"),
        (json.dumps({"type": "session.config", "stream_audio": True}), "stream_audio"),
        (json.dumps({"type": "session.config", "speed": 9}), "speed"),
        (
            json.dumps(
                {"type": "session.config", "word_timestamps": True, "stream_audio": True, "response_format": "pcm"}
            ),
            "forced-aligner",
        ),
        (json.dumps({"type": "session.config", "pad": "x" * (4 * 1024 * 1024 + 1)}), "too large"),
    ],
)
def test_invalid_first_message_is_an_error_then_close(client, first, message):
    with client.websocket_connect(WS) as ws:
        ws.send_text(first)
        event = json.loads(ws.receive_text())
        assert event["type"] == "error" and message in event["message"], event
        with pytest.raises(WebSocketDisconnect) as info:
            ws.receive_text()
    assert info.value.code == 1008


def test_other_formats(client):
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps({"type": "session.config", "response_format": "flac"}))
        events, frames, _ = utterance(ws, "Hi.")
    assert frames[0][:4] == b"fLaC" and events[1]["total_bytes"] == len(frames[0])


def test_speech_served_only_by_tts_models(make_client):
    client = make_client(model="Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    with client.websocket_connect(WS) as ws:
        assert "not initialized" in json.loads(ws.receive_text())["message"]
    r = client.post("/v1/audio/speech", json={"input": "hi"})
    assert_error_shape(r, 503, "Speech generation handler not initialized.")
    tts = make_client(model="Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice")
    assert (
        tts.post("/v1/audio/speech", json={"input": "hi", "voice": "vivian", "language": "English"}).status_code == 200
    )
    assert_error_shape(tts.post("/v1/images/generations", json={"prompt": "p"}), 503, "not initialized")


def test_http_speech(client):
    r = client.post("/v1/audio/speech", json={"input": "Hello world", "voice": "vivian", "language": "English"})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(r.content)) as wav:
        assert wav.getframerate() == 24000 and wav.getnframes() > 24000 * 0.5
    pcm = client.post("/v1/audio/speech", json={"input": "Hello world", "response_format": "pcm"})
    assert pcm.headers["content-type"] == "audio/pcm" and len(pcm.content) == len(r.content) - 44
    streamed = client.post(
        "/v1/audio/speech", json={"input": "Hello world", "response_format": "pcm", "stream_format": "audio"}
    )
    assert streamed.content == pcm.content
    sse = client.post("/v1/audio/speech", json={"input": "Hello world", "response_format": "pcm", "stream": True})
    assert sse.headers["content-type"].startswith("text/event-stream") and b"speech.audio.delta" in sse.content
    bad = client.post("/v1/audio/speech", json={"input": "x", "stream": True, "response_format": "mp3"})
    assert_error_shape(bad, 400, "Streaming requires")
    assert_error_shape(client.post("/v1/audio/speech", json={"voice": "x"}), 400, "input")
    assert_error_shape(
        client.post("/v1/audio/speech", content=b"x", headers={"Content-Type": "text/plain"}), 400, "json"
    )
    voices = client.get("/v1/audio/voices").json()
    assert "Vivian" in voices["voices"] and voices["uploaded_voices"] == []


@pytest.mark.parametrize("value", ["sentence", "clause", "paragraph"])
def test_split_granularity_other_than_none_is_refused_clearly(client, value):
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps({**PCM_CONFIG, "split_granularity": value}))
        message = json.loads(ws.receive_text())["message"]
        assert "split_granularity" in message and "not supported" in message and "0.26.0" in message


def test_split_granularity_none_is_accepted(client):
    with client.websocket_connect(WS) as ws:
        ws.send_text(json.dumps({**PCM_CONFIG, "split_granularity": "none"}))
        events, frames, _ = utterance(ws, "One request. Even with two sentences.")
        assert [e["type"] for e in events] == ["audio.start", "audio.done", "session.done"] and frames
