"""HTTP speech routes: ``POST /v1/audio/speech`` and ``GET /v1/audio/voices`` (Qwen3-TTS-like)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .audio import BYTES_PER_SAMPLE, MEDIA_TYPES, SAMPLE_RATE, UnsupportedFormatError, encode_audio, synthesize
from .errors import EmulatorError
from .faults import apply_http_faults
from .state import get_state, json_request, require_kind

VOICES = ["Vivian", "Serena", "Uncle_Fu", "Dylan", "Eric", "Ryan", "Aiden", "Ono_Anna", "Sohee"]
ResponseFormat = Literal["wav", "pcm", "flac", "mp3", "opus"]
MALFORMED_AUDIO = b"RIFF\xff\xff\xff\x7fWAVEgarbage"


class SpeechRequest(BaseModel):
    """``OpenAICreateSpeechRequest`` (unknown keys ignored; ``speaker`` is an alias of ``voice``)."""

    model_config = ConfigDict(extra="ignore")

    input: str
    model: str | None = None
    voice: str | None = None
    instructions: str | None = None
    response_format: ResponseFormat = "wav"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream: bool = False
    stream_format: Literal["sse", "audio"] | None = None
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    max_new_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = Field(default=None, ge=0)
    initial_codec_chunk_frames: int | None = None
    non_streaming_mode: bool | None = None
    extra_params: dict[str, Any] | None = None
    word_timestamps: bool = False

    @model_validator(mode="before")
    @classmethod
    def _speaker_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("voice") is None and data.get("speaker") is not None:
            data = {**data, "voice": data["speaker"]}
        return data


async def list_voices(request: Request) -> Response:
    require_kind(get_state(request), "speech")
    return JSONResponse({"voices": VOICES, "uploaded_voices": []})


async def create_speech(request: Request) -> Response:
    state = get_state(request)
    req = await json_request(request, SpeechRequest)
    require_kind(state, "speech")
    config = state.config
    if not config.accepts_model(req.model):
        served = config.served_model_name("speech")
        raise EmulatorError(400, f"Model mismatch: requested '{req.model}', but server is serving '{served}'")
    if not req.input.strip():
        raise EmulatorError(400, "input must not be empty")
    if req.word_timestamps:
        raise EmulatorError(400, "word_timestamps is only supported on the /v1/audio/speech/stream WebSocket")
    streaming = req.stream or req.stream_format is not None
    if streaming and (req.response_format not in ("pcm", "wav") or req.speed != 1.0):
        raise EmulatorError(400, "Streaming requires response_format 'pcm' or 'wav' and speed 1.0")
    decision = state.injector.decide(config, "speech")
    await apply_http_faults(decision, "Speech generation failed")
    samples = await asyncio.to_thread(synthesize, req.input, req.voice, req.speed)
    if decision.malformed:
        return Response(MALFORMED_AUDIO, media_type=MEDIA_TYPES[req.response_format])
    try:
        encoded = await asyncio.to_thread(encode_audio, samples, req.response_format)
    except UnsupportedFormatError as exc:
        raise EmulatorError(400, str(exc)) from exc
    if not streaming:
        return Response(encoded, media_type=MEDIA_TYPES[req.response_format])
    chunk_bytes = int(SAMPLE_RATE * config.speech_chunk_ms / 1000) * BYTES_PER_SAMPLE
    rtf = config.speech_realtime_factor
    if req.stream_format == "audio":
        return StreamingResponse(_paced(encoded, chunk_bytes, rtf), media_type=MEDIA_TYPES[req.response_format])
    return StreamingResponse(_sse(encoded, chunk_bytes, rtf), media_type="text/event-stream")


async def _paced(data: bytes, chunk_bytes: int, realtime_factor: float) -> AsyncIterator[bytes]:
    for offset in range(0, len(data), chunk_bytes):
        piece = data[offset : offset + chunk_bytes]
        if realtime_factor > 0:
            await asyncio.sleep(len(piece) / BYTES_PER_SAMPLE / SAMPLE_RATE / realtime_factor)
        yield piece


async def _sse(data: bytes, chunk_bytes: int, realtime_factor: float) -> AsyncIterator[bytes]:
    """``speech.audio.*`` server-sent events (shape approximated: delta events with base64 audio, then done)."""
    async for piece in _paced(data, chunk_bytes, realtime_factor):
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode("ascii")}
        yield f"data: {json.dumps(event)}\n\n".encode()
    yield f"data: {json.dumps({'type': 'speech.audio.done', 'total_bytes': len(data)})}\n\n".encode()
