"""``omnireel tts``: one utterance through the TTS relay, streamed into a 24 kHz mono 16-bit WAV.

The client speaks vLLM-Omni's streaming-TTS WebSocket protocol, as any voice app would: ``session.config``
(``response_format: "pcm"``, ``stream_audio: true``), ``input.text``, ``input.done``; the relay answers
``audio.start`` (``sample_rate``), binary PCM16 LE frames as they are produced, ``audio.done`` (``total_bytes``) and
``session.done``; then the client sends ``session.close``. PCM frames are written to the WAV as they arrive.

Where the relay is: ``--url`` / ``--token``; else ``--stack NAME`` (the ``RelayUrl`` output and the token in the
``RelayTokenSecretArn`` secret); else the local stack (``omnireel local up`` starts a relay with a fresh token).

``omnireel tts --open`` opens the relay's web page instead, with the token in the URL *fragment*
(``http://host:port/#token=...``): browsers never send a fragment to the server, so the token does not reach the
relay's (or a load balancer's) request logs, and the page takes it out of the address bar once read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import wave
import webbrowser
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from .errors import CliError, InfraError, JobFailed, UsageError
from .target import Target

SAMPLE_RATE = 24_000
SAMPLE_WIDTH = 2  # PCM16
CHANNELS = 1
CONNECT_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 3.0
MAX_FRAME_BYTES = 16 * 1024 * 1024


@dataclass
class Relay:
    url: str
    token: str
    where: str  # "local" or the stack name, for messages


@dataclass
class Speech:
    path: str
    sample_rate: int
    channels: int
    sample_width_bytes: int
    frames: int
    bytes: int
    chunks: int
    audio_s: float
    time_to_first_audio_s: float
    total_s: float
    relay_url: str

    def lines(self) -> list[str]:
        return [
            f"saved {self.path}: {self.sample_rate} Hz mono 16-bit, {self.audio_s:.2f} s of audio "
            f"({self.bytes} bytes in {self.chunks} chunk(s))",
            f"  time to first audio  {self.time_to_first_audio_s * 1000:7.0f} ms  (input.done -> first PCM frame)",
            f"  total                {self.total_s:7.2f} s",
        ]


# ---------------------------------------------------------------- where the relay is
def _secret_token(target: Target, secret_id: str) -> str:
    """The token in the relay's secret, parsed as the relay parses it (``omnireel_relay.token_secret``)."""
    from omnireel_relay.token_secret import TokenSourceError, token_from_secret_string

    try:
        value = target.client("secretsmanager").get_secret_value(SecretId=secret_id)["SecretString"]
    except Exception as exc:
        raise InfraError(f"cannot read the relay token from {secret_id}: {exc}") from exc
    try:
        return token_from_secret_string(value, secret_id)
    except TokenSourceError as exc:
        raise InfraError(f"the relay {exc}") from None


def relay_of(target: Target) -> Relay | None:
    """The relay of a stack, or None if it has none (EnableVoice=false, or `local up --no-relay`)."""
    if target.local:
        relay = target.state.get("relay") or {}
        return Relay(relay["url"], relay["token"], "local") if relay.get("url") else None
    url = target.outputs.get("RelayUrl")
    if not url:
        return None
    secret = target.outputs.get("RelayTokenSecretArn")
    if not secret:
        raise InfraError(f"stack {target.name} has a RelayUrl but no RelayTokenSecretArn output")
    return Relay(url, _secret_token(target, secret), target.name)


def resolve(stack: str | None, region: str | None, url: str | None, token: str | None) -> Relay:
    if url and token:
        return Relay(url, token, url)
    target = Target.deployed(stack, region) if stack else Target.local_stack()
    relay = relay_of(target)
    if relay is None:
        if target.local:
            raise InfraError(
                "the local stack runs without the TTS relay (started with --no-relay, or EnableVoice=false): "
                "restart it with `omnireel local down && omnireel local up`"
            )
        raise InfraError(f"stack {target.name} has no voice (EnableVoice=false): no RelayUrl output")
    return Relay(url or relay.url, token or relay.token, relay.where)


# ---------------------------------------------------------------- the web page
def page_url(relay: Relay) -> str:
    """The relay's page for its WebSocket URL: ws://h:p/v1/audio/speech/stream -> http://h:p/ (wss -> https)."""
    parts = urlsplit(relay.url)
    if parts.scheme not in ("ws", "wss"):
        raise UsageError(f"the relay URL must be ws:// or wss://, got {relay.url!r}")
    return urlunsplit(("https" if parts.scheme == "wss" else "http", parts.netloc, "/", "", ""))


def open_page(relay: Relay, opener: Callable[[str], bool] = webbrowser.open) -> tuple[str, bool]:
    """Open the relay page with the token in the fragment; returns (page URL without the token, opened?)."""
    page = page_url(relay)
    opened = bool(opener(f"{page}#token={quote(relay.token, safe='')}"))
    return page, opened


# ---------------------------------------------------------------- the session
def speak(relay: Relay, text: str, out: Path, *, voice: str | None = None, language: str | None = None,
          timeout: float = 60.0) -> Speech:  # fmt: skip
    """Synthesize ``text`` through the relay into ``out`` (a WAV); raise a CliError with one clear line otherwise."""
    if not text.strip():
        raise UsageError("nothing to say: TEXT is empty")
    if not relay.url.startswith(("ws://", "wss://")):
        raise UsageError(f"the relay URL must be ws:// or wss://, got {relay.url!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        speech = asyncio.run(_session(relay, text, partial, voice, language, timeout))
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    speech.path = str(out)
    return speech


async def _session(relay: Relay, text: str, path: Path, voice: str | None, language: str | None,
                   timeout: float) -> Speech:  # fmt: skip
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            try:
                ws = await connect(
                    relay.url,
                    additional_headers={"Authorization": f"Bearer {relay.token}"},
                    open_timeout=min(CONNECT_TIMEOUT_S, timeout),
                    close_timeout=CLOSE_TIMEOUT_S,
                    max_size=MAX_FRAME_BYTES,
                )
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403):
                    raise CliError(
                        f"the relay at {relay.url} refused the token (HTTP {status}): check --token "
                        "(deployed: the RelayTokenSecretArn secret; local: `omnireel local env`)",
                        code=2,
                    ) from exc
                raise InfraError(f"the relay at {relay.url} refused the connection: HTTP {status}") from exc
            except InvalidURI as exc:
                raise UsageError(f"invalid relay URL {relay.url!r}: {exc}") from exc
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                reason = str(exc) or type(exc).__name__
                raise InfraError(f"the relay at {relay.url} is unreachable: {reason}") from exc
            try:
                return await _converse(ws, relay, text, path, voice, language, started)
            except ConnectionClosed as exc:
                raise InfraError(
                    f"the relay closed the connection before the utterance finished ({_close_reason(exc)})"
                ) from exc
            finally:
                with contextlib.suppress(Exception):
                    await ws.close()
    except TimeoutError as exc:
        raise InfraError(f"no complete answer from the relay at {relay.url} within {timeout:.0f} s") from exc


def _close_reason(exc: Any) -> str:
    received = getattr(exc, "rcvd", None)
    if received is None:
        return "no close frame"
    return f"code {received.code}" + (f": {received.reason}" if received.reason else "")


async def _converse(ws: Any, relay: Relay, text: str, path: Path, voice: str | None, language: str | None,
                    started: float) -> Speech:  # fmt: skip
    config: dict[str, Any] = {"type": "session.config", "response_format": "pcm", "stream_audio": True}
    if voice:
        config["voice"] = voice
    if language:
        config["language"] = language
    await ws.send(json.dumps(config))
    await ws.send(json.dumps({"type": "input.text", "text": text}))
    sent_done = time.monotonic()
    await ws.send(json.dumps({"type": "input.done"}))

    writer: wave.Wave_write | None = None
    first_audio: float | None = None
    received = chunks = 0
    carry = b""  # an odd trailing byte, completed by the next frame
    total_bytes: int | None = None
    sample_rate = 0
    try:
        async for message in ws:
            if isinstance(message, bytes):
                if writer is None:
                    raise JobFailed("the relay sent audio before audio.start")
                if first_audio is None:
                    first_audio = time.monotonic()
                received += len(message)
                chunks += 1
                data = carry + message
                even = len(data) - len(data) % SAMPLE_WIDTH
                writer.writeframesraw(data[:even])
                carry = data[even:]
                continue
            try:
                event = json.loads(message)
            except ValueError as exc:
                raise JobFailed(f"the relay sent a text frame that is not JSON: {message[:120]!r}") from exc
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == "error":
                raise JobFailed(f"the relay reported an error: {event.get('message') or event}")
            if kind == "audio.start":
                if writer is not None:
                    raise JobFailed("the relay sent a second audio.start for one utterance")
                sample_rate = event.get("sample_rate")
                if sample_rate is None:
                    raise JobFailed("audio.start has no sample_rate (streamed PCM must be 24000 Hz)")
                if sample_rate != SAMPLE_RATE:
                    raise JobFailed(f"audio.start.sample_rate is {sample_rate}, expected {SAMPLE_RATE}")
                writer = wave.open(str(path), "wb")  # noqa: SIM115 - closed in finally
                writer.setnchannels(CHANNELS)
                writer.setsampwidth(SAMPLE_WIDTH)
                writer.setframerate(SAMPLE_RATE)
            elif kind == "audio.done":
                if event.get("error"):
                    raise JobFailed("the relay ended the utterance with an error (audio.done.error)")
                total_bytes = event.get("total_bytes")
                if total_bytes != received:
                    raise JobFailed(f"audio.done.total_bytes is {total_bytes}, but {received} bytes of PCM arrived")
            elif kind == "session.done":
                break
        else:
            reason = f"code {ws.close_code}" + (f": {ws.close_reason}" if ws.close_reason else "")
            raise InfraError(f"the relay closed the connection before session.done ({reason})")
    finally:
        if writer is not None:
            writer.close()  # patches the header's sizes
    if writer is None or total_bytes is None:
        raise JobFailed("the relay finished the utterance without audio.start / audio.done")
    if carry:
        raise JobFailed(f"the PCM stream has an odd length ({received} bytes): not 16-bit samples")
    if first_audio is None or received == 0:
        raise JobFailed("the relay sent no audio")
    with contextlib.suppress(Exception):
        await ws.send(json.dumps({"type": "session.close"}))
        await asyncio.wait_for(ws.wait_closed(), CLOSE_TIMEOUT_S)
    frames = received // SAMPLE_WIDTH
    return Speech(
        path=str(path),
        sample_rate=sample_rate,
        channels=CHANNELS,
        sample_width_bytes=SAMPLE_WIDTH,
        frames=frames,
        bytes=received,
        chunks=chunks,
        audio_s=frames / SAMPLE_RATE,
        time_to_first_audio_s=first_audio - sent_done,
        total_s=time.monotonic() - started,
        relay_url=relay.url,
    )


def as_json(speech: Speech) -> str:
    return json.dumps(asdict(speech))
