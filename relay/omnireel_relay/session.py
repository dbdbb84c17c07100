"""One client session: one client WebSocket <-> one upstream stream, with limits and backpressure.

Tasks per session:
- ``client→outbox``: validates each client event (size, JSON, text per utterance) and queues it unchanged;
  an invalid event gets an ``error`` event back and is NOT forwarded; the session continues.
- ``outbox→upstream``: forwards queued events in order, but none while an utterance is in flight upstream (from its
  ``input.done`` to its ``session.done``). vLLM-Omni reads nothing while it synthesises, and uvicorn pauses reading a
  WebSocket once a message is waiting for the app: it then cannot read the pongs to its own keepalive pings either
  and closes the connection with 1011 "keepalive ping timeout" after 40 s (issue 10, item 1). Holding the events in
  the relay until the utterance ends changes nothing the server sees (it would read them at that moment anyway) and
  keeps its socket readable. Bounded: ``max_held_events`` / ``max_held_bytes`` (→ ``error``, close 1008).
- ``upstream→queue``: reads upstream frames and appends them to a bounded send queue (frames and bytes).
  If the queue is full the client is not keeping up: the session is closed with 1008 "client too slow".
- ``queue→client``: sends frames in order (websockets' ``send`` waits on its own bounded write buffer).

Endings (close code to the client):
- upstream ends cleanly (e.g. after ``session.close``) → queued frames are flushed, then the upstream's close code
  (1000 normally) is passed through;
- upstream failure (connect refused, dropped mid-stream, SageMaker model stream error) → ``error`` event, then 1011.
  Upstream JSON ``error`` events are ordinary frames: forwarded, session kept (vLLM-Omni semantics);
- upstream silent for ``upstream_progress_timeout`` while an utterance is in flight → ``error`` event, then 1011;
- session time limit → ``error`` event (if the queue has room), then 1008;
- send queue full → 1008 "client too slow" immediately (nothing more is buffered);
- drain deadline → 1001 "relay shutting down";
- client disconnects → the upstream is closed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from .logging import session_id_var
from .metrics import Metrics, emit_emf
from .protocol import Close, ProtocolError, error_event, parse_client_event, server_event_type
from .settings import Settings
from .upstream import Upstream, UpstreamError, UpstreamFactory
from .utterances import UtteranceTracker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _End:
    code: int
    reason: str


class Session:
    def __init__(self, ws: ServerConnection, factory: UpstreamFactory, settings: Settings, metrics: Metrics) -> None:
        self.id = uuid.uuid4().hex[:16]
        self.ws = ws
        self._factory = factory
        self._s = settings
        self._m = metrics
        self._upstream: Upstream | None = None
        self._queue: asyncio.Queue[str | bytes | _End] = asyncio.Queue()
        self._q_frames = 0
        self._q_bytes = 0
        self.max_queued_frames = 0
        self.max_queued_bytes = 0
        self._ended = asyncio.Event()
        self._end: _End | None = None
        self._flush = False
        self._text_chars = 0
        self._utterances = UtteranceTracker()  # pairs input.done with audio.start / session.done (bounded)
        self._last_progress = time.monotonic()  # last upstream frame (or first input.done after a quiet spell)
        self._awaiting_first_audio: float | None = None
        # client events waiting to go upstream: (type, message, arrival time)
        self._held: collections.deque[tuple[str, str, float]] = collections.deque()
        self._held_bytes = 0
        self._held_changed = asyncio.Event()
        self._upstream_idle = asyncio.Event()  # set: no utterance in flight upstream, events may be forwarded
        self._upstream_idle.set()
        self.ttfa_ms: list[float] = []
        self.audio_bytes = 0
        self.audio_chunks = 0

    # ----------------------------------------------------------------------------------- lifecycle
    def finish(self, code: int, reason: str, *, flush: bool = False) -> None:
        """Request the end of the session (first request wins)."""
        if self._end is None:
            self._end = _End(code, reason)
            self._flush = flush
            self._ended.set()

    async def run(self) -> None:
        session_id_var.set(self.id)
        started = time.monotonic()
        log.info("session open", extra={"remote": str(self.ws.remote_address), "upstream": self._s.upstream})
        tasks: list[asyncio.Task[None]] = []
        try:
            try:
                self._upstream = await asyncio.wait_for(
                    self._factory.open(self.id), timeout=self._s.upstream_connect_timeout
                )
            except (UpstreamError, TimeoutError) as exc:
                reason = exc.reason if isinstance(exc, UpstreamError) else "connect"
                message = exc.message if isinstance(exc, UpstreamError) else "timed out connecting to the TTS upstream"
                self._m.errors[f"upstream_{reason}"] += 1
                log.warning("upstream open failed", extra={"error": message})
                await self._send_direct(error_event(message, "upstream_unavailable"))
                await self._close_client(Close.INTERNAL, "upstream unavailable")
                return
            writer = asyncio.create_task(self._client_writer(), name=f"{self.id}-writer")
            tasks = [
                asyncio.create_task(self._client_reader(), name=f"{self.id}-reader"),
                asyncio.create_task(self._upstream_writer(), name=f"{self.id}-forwarder"),
                asyncio.create_task(self._upstream_reader(), name=f"{self.id}-upstream"),
                asyncio.create_task(self._progress_watchdog(), name=f"{self.id}-watchdog"),
                writer,
            ]
            try:
                async with asyncio.timeout(self._s.max_session_seconds):
                    await self._ended.wait()
            except TimeoutError:
                self._m.errors["session_time_limit"] += 1
                self._try_enqueue_control(
                    error_event(f"session exceeded {self._s.max_session_seconds:g} s", "session_time_limit")
                )
                self.finish(Close.POLICY, "session time limit", flush=True)
            assert self._end is not None
            if self._flush and not writer.done():
                # Let the writer flush what is queued (bounded), then it closes the client itself.
                self._queue.put_nowait(self._end)
                try:
                    async with asyncio.timeout(self._s.close_timeout + 1):
                        await asyncio.shield(writer)
                except (TimeoutError, Exception):
                    log.debug("flush before close did not complete", exc_info=True)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._close_client(self._end.code, self._end.reason)
        finally:
            for task in tasks:
                task.cancel()
            if self._upstream is not None:
                await self._upstream.close()
            code = self.ws.close_code if self.ws.close_code is not None else (self._end.code if self._end else 1006)
            self._m.closes[code] += 1
            log.info(
                "session closed",
                extra={
                    "close_code": code,
                    "close_reason": self._end.reason if self._end else "",
                    "duration_s": round(time.monotonic() - started, 3),
                    "audio_bytes": self.audio_bytes,
                    "audio_chunks": self.audio_chunks,
                    "ttfa_ms": self.ttfa_ms,
                    "max_queued_frames": self.max_queued_frames,
                },
            )
            if self._s.emf:
                emit_emf(self._s.emf_namespace, self.id, self.ttfa_ms, self.audio_bytes, self.audio_chunks, code)

    # ----------------------------------------------------------------------------------- client → upstream
    async def _client_reader(self) -> None:
        assert self._upstream is not None
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    self._reject(
                        ProtocolError("binary_not_accepted", "the relay accepts JSON text events only"),
                    )
                    continue
                try:
                    event = parse_client_event(message)
                except ProtocolError as exc:
                    self._reject(exc)
                    continue
                if event.type != "session.config" and len(message.encode()) > self._s.max_event_bytes:
                    self._m.errors["message_too_big"] += 1
                    self.finish(Close.TOO_BIG, f"{event.type} larger than {self._s.max_event_bytes} bytes")
                    return
                if event.type == "input.text":
                    assert event.text is not None
                    if self._text_chars + len(event.text) > self._s.max_text_chars:
                        self._reject(
                            ProtocolError(
                                "text_limit",
                                f"utterance text exceeds {self._s.max_text_chars} characters; "
                                "this input.text was dropped, send input.done or shorter text",
                            )
                        )
                        continue
                    self._text_chars += len(event.text)
                elif event.type == "input.done":
                    self._text_chars = 0
                    self._m.utterances_total += 1
                if not self._hold(event.type, message):
                    return
        except ConnectionClosed:
            pass
        # The client went away (or closed): nothing more can be delivered.
        if self.ws.close_code == Close.TOO_BIG:
            self._m.errors["message_too_big"] += 1
        self.finish(self.ws.close_code or Close.NORMAL, "client closed")

    def _hold(self, kind: str, message: str) -> bool:
        """Queue one valid client event for the forwarder; False (session ending) when the queue is full."""
        size = len(message)
        if len(self._held) >= self._s.max_held_events or self._held_bytes + size > self._s.max_held_bytes:
            self._m.errors["too_far_ahead"] += 1
            text = (
                f"more than {self._s.max_held_events} events or {self._s.max_held_bytes} bytes are waiting for the "
                "utterance in progress to finish"
            )
            self._try_enqueue_control(error_event(text, "too_far_ahead"))
            self.finish(Close.POLICY, "client too far ahead of the utterance in progress", flush=True)
            return False
        self._held.append((kind, message, time.monotonic()))
        self._held_bytes += size
        self._held_changed.set()
        return True

    async def _upstream_writer(self) -> None:
        """Forward held client events in order; none while an utterance is in flight upstream (see module doc)."""
        assert self._upstream is not None
        try:
            while True:
                while not self._held:
                    self._held_changed.clear()
                    await self._held_changed.wait()
                await self._upstream_idle.wait()
                kind, message, arrival = self._held.popleft()
                self._held_bytes -= len(message)
                if kind == "input.done":
                    self._last_progress = time.monotonic()  # the progress clock starts with this utterance
                    self._utterances.flushed(now=arrival)  # TTFA counts from when the client sent it
                    self._upstream_idle.clear()
                self._m.client_messages_total += 1
                await self._upstream.send_text(message)
                if kind == "session.close":
                    await self._upstream.end_input()
        except UpstreamError as exc:
            self._upstream_failed(exc)

    def _reject(self, exc: ProtocolError) -> None:
        self._m.errors[exc.code] += 1
        log.info("client event rejected", extra={"code": exc.code, "error": exc.message})
        self._try_enqueue_control(error_event(exc.message, exc.code))

    # ----------------------------------------------------------------------------------- upstream → client
    async def _upstream_reader(self) -> None:
        assert self._upstream is not None
        try:
            while True:
                frame = await self._upstream.receive()
                self._last_progress = time.monotonic()
                if isinstance(frame, str) and len(frame) < 4096 and server_event_type(frame)[0] == "error":
                    # An upstream error answers the utterance in flight (0.26.0 follows generation errors with
                    # session.done; servers that do not must not leave the client's next events held forever).
                    self._utterances.errored()
                    if not self._utterances.in_flight:
                        self._upstream_idle.set()
                if frame is None:
                    code = self._upstream.close_code or Close.NORMAL
                    if code in (1005, 1006) or not (1000 <= code <= 4999):
                        code = Close.NORMAL
                    self.finish(code, self._upstream.close_reason or "upstream closed", flush=True)
                    return
                if not self._enqueue(frame):
                    self._m.errors["client_too_slow"] += 1
                    log.warning(
                        "send queue full, closing slow client",
                        extra={"queued_frames": self._q_frames, "queued_bytes": self._q_bytes},
                    )
                    self.finish(Close.POLICY, "client too slow: send queue full")
                    return
        except UpstreamError as exc:
            self._upstream_failed(exc)

    async def _progress_watchdog(self) -> None:
        """End the session when the upstream sends nothing for ``upstream_progress_timeout`` mid-utterance.

        The liveness check for a server that is connected but stuck (WebSocket pings cannot be used: see
        upstream_websocket.py). Idle sessions (no utterance in flight) are not affected.
        """
        limit = self._s.upstream_progress_timeout
        while True:
            await asyncio.sleep(min(1.0, limit / 4))
            if self._utterances.in_flight and time.monotonic() - self._last_progress > limit:
                message = f"the TTS upstream sent nothing for {limit:g} s while an utterance was in progress"
                self._upstream_failed(UpstreamError("stalled", message))
                return

    def _upstream_failed(self, exc: UpstreamError) -> None:
        self._m.errors[f"upstream_{exc.reason}"] += 1
        log.warning("upstream failed", extra={"reason": exc.reason, "error": exc.message})
        self._try_enqueue_control(error_event(exc.message, f"upstream_{exc.reason}"))
        self.finish(Close.INTERNAL, "upstream failed", flush=True)

    def _enqueue(self, frame: str | bytes) -> bool:
        size = len(frame)
        if self._q_frames + 1 > self._s.send_queue_frames or self._q_bytes + size > self._s.send_queue_bytes:
            return False
        self._q_frames += 1
        self._q_bytes += size
        self.max_queued_frames = max(self.max_queued_frames, self._q_frames)
        self.max_queued_bytes = max(self.max_queued_bytes, self._q_bytes)
        self._queue.put_nowait(frame)
        return True

    def _try_enqueue_control(self, text: str) -> None:
        """Relay-originated events share the queue (keeps ordering); dropped if a slow client filled it."""
        if not self._enqueue(text):
            self.finish(Close.POLICY, "client too slow: send queue full")

    async def _client_writer(self) -> None:
        send = self.ws.send
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, _End):
                    await self._close_client(item.code, item.reason)
                    return
                self._q_frames -= 1
                self._q_bytes -= len(item)
                if isinstance(item, bytes):
                    await send(item)
                    self._on_audio(len(item))
                else:
                    await send(item)
                    self._on_text(item)
        except ConnectionClosed:
            self.finish(self.ws.close_code or Close.NORMAL, "client closed")

    # ----------------------------------------------------------------------------------- measuring
    def _on_audio(self, n: int) -> None:
        self.audio_bytes += n
        self.audio_chunks += 1
        self._m.audio_bytes_total += n
        self._m.audio_chunks_total += 1
        if self._awaiting_first_audio is not None:
            ttfa = time.monotonic() - self._awaiting_first_audio
            self._awaiting_first_audio = None
            self._m.ttfa.observe(ttfa)
            self.ttfa_ms.append(round(ttfa * 1000, 2))

    def _on_text(self, text: str) -> None:
        event_type, body = server_event_type(text)
        if event_type == "audio.start" and body is not None:
            self._awaiting_first_audio = self._utterances.audio_started(body)
        elif event_type == "session.done" and body is not None:
            self._utterances.session_done(body)
            if not self._utterances.in_flight:
                self._upstream_idle.set()
        elif event_type == "audio.chunk" and body and body.get("audio_b64"):
            self._on_audio(len(str(body["audio_b64"])) * 3 // 4)

    # ----------------------------------------------------------------------------------- helpers
    async def _send_direct(self, text: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(text)

    async def _close_client(self, code: int, reason: str) -> None:
        try:
            await self.ws.close(code, reason[:120])
        except Exception:
            log.debug("client close failed", exc_info=True)
