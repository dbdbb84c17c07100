"""WebSocket ``/v1/audio/speech/stream``: vLLM-Omni's streaming TTS event protocol.

Client -> server: JSON text frames ``session.config`` (first, within ``ws_config_timeout_s``), ``input.text``,
``input.done`` (flushes the buffer as one utterance), ``session.close``. Server -> client per utterance:
``audio.start``, binary audio frames (progressive raw PCM16 LE 24 kHz chunks with ``stream_audio`` + pcm, else one frame
with the whole file), ``audio.done`` (``total_bytes``), ``session.done``. ``error`` events at any time; after a valid
config the session survives them. The session ends after ``ws_idle_timeout_s`` without a message.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.websockets import WebSocket, WebSocketDisconnect

from .audio import (
    BYTES_PER_SAMPLE,
    SAMPLE_RATE,
    SynthesisCancelled,
    UnsupportedFormatError,
    encode_audio,
    pcm_bytes,
    synthesize,
)
from .errors import validation_message
from .peer import PeerWatch
from .state import NOT_INITIALIZED, EmulatorState, get_state

log = logging.getLogger(__name__)

CONFIG_MAX_BYTES = 4 * 1024 * 1024
MESSAGE_MAX_BYTES = 128 * 1024
GARBAGE_FRAME = b"\xde\xad\xbe"  # odd length: breaks PCM16 alignment (fault "malformed")


class StreamingSpeechSessionConfig(BaseModel):
    """``session.config`` (unknown keys ignored; ``speaker`` is an alias of ``voice``)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    voice: str | None = None
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    max_new_tokens: int | None = Field(default=None, ge=1)
    initial_codec_chunk_frames: int | None = None
    non_streaming_mode: bool | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    stream_audio: bool = False
    word_timestamps: bool = False
    # Not a vLLM-Omni 0.26.0 field (0.26.0 ignores it: one request per input.done). Later releases split a flush into
    # sentences/clauses; the emulator refuses those values instead of silently behaving like "none".
    split_granularity: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _speaker_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("voice") is None and data.get("speaker") is not None:
            data = {**data, "voice": data["speaker"]}
        return data

    @model_validator(mode="after")
    def _streaming_rules(self) -> StreamingSpeechSessionConfig:
        if self.stream_audio and (self.response_format != "pcm" or self.speed != 1.0):
            raise ValueError("stream_audio=true requires response_format='pcm' and speed=1.0")
        if self.word_timestamps and not (self.stream_audio and self.response_format == "pcm"):
            raise ValueError("word_timestamps=true requires stream_audio=true and response_format='pcm'")
        if self.split_granularity not in (None, "none"):
            raise ValueError(
                f"split_granularity={self.split_granularity[:32]!r} is not supported: vLLM-Omni 0.26.0 (the DLC's "
                "version) synthesizes each input.done as one request; send 'none' or omit it, and split sentences "
                "client-side with one input.done each"
            )
        return self


class _SessionEnded(Exception):
    pass


class SpeechStreamSession:
    def __init__(self, websocket: WebSocket, state: EmulatorState) -> None:
        self.ws = websocket
        self.state = state
        self.config: StreamingSpeechSessionConfig | None = None
        self.buffer: list[str] = []
        self.utterance_index = 0
        self.peer = PeerWatch(websocket)  # "has the client gone?" without reading (see peer.py)

    async def send_error(self, message: str) -> None:
        await self.ws.send_text(json.dumps({"type": "error", "message": message}))

    async def fail(self, message: str, code: int = 1008) -> None:
        """Error event, then close (used before a valid config and on timeouts)."""
        await self.send_error(message)
        await self.ws.close(code)
        raise _SessionEnded

    async def run(self) -> None:
        try:
            if not self.state.config.serves("speech"):
                await self.fail(NOT_INITIALIZED["speech"], code=1011)
            while True:
                await self.handle(await self.receive())
        except (_SessionEnded, WebSocketDisconnect):
            return
        except (RuntimeError, OSError) as exc:  # client vanished mid-send
            log.debug("speech stream ended: %r", exc)

    async def receive(self) -> dict[str, Any]:
        cfg = self.state.config
        timeout = cfg.ws_config_timeout_s if self.config is None else cfg.ws_idle_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(self.ws.receive(), timeout=timeout)
            except TimeoutError:
                if self.config is None:
                    await self.fail(f"Timed out waiting for session.config ({timeout:g}s)")
                await self.fail(f"Session idle timeout: no message for {timeout:g}s", code=1000)
            if message["type"] == "websocket.disconnect":
                raise _SessionEnded
            text = message.get("text")
            if text is None:
                await self.reject("Binary frames are not supported; send JSON text frames")
                continue
            size = len(text.encode("utf-8"))
            if size > CONFIG_MAX_BYTES:
                await self.reject(f"Message too large ({size} bytes; limit {CONFIG_MAX_BYTES})")
                continue
            try:
                payload = json.loads(text)
            except ValueError:
                await self.reject("Invalid JSON message")
                continue
            if not isinstance(payload, dict):
                await self.reject("Message must be a JSON object")
                continue
            if payload.get("type") != "session.config" and size > MESSAGE_MAX_BYTES:
                await self.reject(f"Message too large ({size} bytes; limit {MESSAGE_MAX_BYTES})")
                continue
            return payload

    async def reject(self, message: str) -> None:
        """An error event; fatal before a valid session.config, survivable after it."""
        if self.config is None:
            await self.fail(message)
        await self.send_error(message)

    async def handle(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if self.config is None and kind != "session.config":
            await self.fail("The first message must be session.config")
        if kind == "session.config":
            await self.configure(payload)
        elif kind == "input.text":
            text = payload.get("text")
            if not isinstance(text, str):
                await self.send_error("input.text requires a string 'text' field")
                return
            self.buffer.append(text)
        elif kind == "input.done":
            # vLLM-Omni 0.26.0: the stripped buffer is one request; an empty flush is answered with session.done
            # (total_sentences 0, no audio, no error) and still counts as an utterance (utterance_index moves on).
            text = "".join(self.buffer).strip()
            self.buffer.clear()
            if text:
                await self.utterance(text)
            else:
                await self.ws.send_text(
                    json.dumps({"type": "session.done", "utterance_index": self.utterance_index, "total_sentences": 0})
                )
            self.utterance_index += 1
        elif kind == "session.close":
            await self.ws.close(1000)
            raise _SessionEnded
        else:
            await self.send_error(f"Unknown message type: {kind!r}")

    async def configure(self, payload: dict[str, Any]) -> None:
        if self.buffer:
            await self.send_error("Cannot change session.config while text is buffered; send input.done first")
            return
        try:
            config = StreamingSpeechSessionConfig.model_validate(payload)
        except ValidationError as exc:
            await self.reject(f"Invalid session.config: {validation_message(exc)}")
            return
        state_config = self.state.config
        if not state_config.accepts_model(config.model):
            served = state_config.served_model_name("speech")
            await self.reject(f"Model mismatch: requested '{config.model}', but server is serving '{served}'")
            return
        if config.word_timestamps:
            await self.reject("word_timestamps requires the server to be started with --forced-aligner")
            return
        self.config = config

    async def utterance(self, text: str) -> None:
        assert self.config is not None
        config, cfg, index = self.config, self.state.config, self.utterance_index
        decision = self.state.injector.decide(cfg, "speech")
        start: dict[str, Any] = {
            "type": "audio.start",
            "utterance_index": index,
            "sentence_index": 0,
            "sentence_text": text,
            "format": config.response_format,
        }
        if config.stream_audio and config.response_format == "pcm":
            start["sample_rate"] = SAMPLE_RATE
            start["channels"] = 1  # mono; later vLLM-Omni releases state it next to sample_rate (0.26.0 does not)
        await self.ws.send_text(json.dumps(start))
        if decision.outcome == "throttle":  # a generation failure, shaped as 0.26.0 shapes any of them
            await self.send_error("Too many requests: injected throttle (emulator)")
            await self.finish(index, 0, error=True)
            return
        if decision.latency_s > 0:
            await asyncio.sleep(decision.latency_s)
        if decision.outcome == "hang":
            await asyncio.sleep(decision.hang_s)
        if decision.outcome in ("error", "hang"):
            await self.send_error("Speech generation failed: injected fault")
            await self.finish(index, 0, error=True)
            return
        try:
            samples = await asyncio.to_thread(synthesize, text, config.voice, config.speed, self.peer.gone)
        except SynthesisCancelled:
            log.info("client left during synthesis of utterance %d: cancelled", index)
            raise _SessionEnded from None
        rtf = cfg.speech_realtime_factor
        sent = 0
        if config.stream_audio:
            pcm = pcm_bytes(samples)
            chunk = int(SAMPLE_RATE * cfg.speech_chunk_ms / 1000) * BYTES_PER_SAMPLE
            for offset in range(0, len(pcm), chunk):
                if self.peer.gone():
                    log.info("client left during utterance %d: streaming stopped", index)
                    raise _SessionEnded
                piece = pcm[offset : offset + chunk]
                if rtf > 0:
                    await asyncio.sleep(len(piece) / BYTES_PER_SAMPLE / SAMPLE_RATE / rtf)
                await self.ws.send_bytes(piece)
                sent += len(piece)
                if decision.malformed and offset == 0:
                    await self.ws.send_bytes(GARBAGE_FRAME)  # not counted in total_bytes
        else:
            try:
                data = await asyncio.to_thread(encode_audio, samples, config.response_format)
            except UnsupportedFormatError as exc:
                await self.send_error(str(exc))
                await self.finish(index, 0, error=True)
                return
            if rtf > 0:  # "generation time", in slices so that a client who left stops it
                end = asyncio.get_running_loop().time() + len(samples) / SAMPLE_RATE / rtf
                while (left := end - asyncio.get_running_loop().time()) > 0:
                    if self.peer.gone():
                        raise _SessionEnded
                    await asyncio.sleep(min(left, 0.25))
            if decision.malformed:
                await self.ws.send_bytes(GARBAGE_FRAME)
                sent = len(data)  # claims the real size: wrong total_bytes
            else:
                await self.ws.send_bytes(data)
                sent = len(data)
        await self.finish(index, sent + (1 if decision.malformed and config.stream_audio else 0), error=False)

    async def finish(self, index: int, total_bytes: int, *, error: bool) -> None:
        done = {"type": "audio.done", "utterance_index": index, "sentence_index": 0, "total_bytes": total_bytes}
        await self.ws.send_text(json.dumps({**done, "error": error}))
        # vLLM-Omni 0.26.0 counts the sentence whether or not its generation failed: total_sentences is 1 either way.
        await self.ws.send_text(json.dumps({"type": "session.done", "utterance_index": index, "total_sentences": 1}))


async def speech_stream(websocket: WebSocket) -> None:
    await websocket.accept()
    await SpeechStreamSession(websocket, get_state(websocket)).run()
