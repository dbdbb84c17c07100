"""A local stand-in for SageMaker's bidirectional-streaming endpoint: HTTP/2 over TLS, AWS event-stream framing.

Speaks the wire protocol the real ``aws-sdk-sagemaker-runtime-http2`` client produces and consumes, so the relay's
SageMaker upstream can be tested end to end through the real SDK and the real CRT HTTP/2 transport:

- ``POST /endpoints/{name}/invocations-bidirectional-stream`` with ``X-Amzn-SageMaker-Model-Invocation-Path``;
  response headers (200, ``application/vnd.amazon.eventstream``) are sent as soon as the request headers arrive.
- Request body: SigV4-signed envelope messages (``:date``, ``:chunk-signature``) whose payload is the encoded
  ``PayloadPart`` event (``:event-type`` ``PayloadPart``, ``DataType``/``CompletionState`` headers, raw bytes
  payload); an envelope with an empty payload ends the input. Signatures are recorded, never verified.
- Response body: ``PayloadPart`` events (UTF8 JSON events, BINARY PCM, one message split into PARTIAL parts) and,
  in ``model_error`` mode, a modeled ``ModelStreamError`` exception message.

TLS uses a throwaway self-signed certificate (``cryptography``); the client must trust ``ca_pem``. ALPN offers
only ``h2``: a client that cannot speak HTTP/2 fails the handshake.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import struct
import tempfile
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
from smithy_aws_event_stream.events import Event, EventMessage

from tests.support.relay.tls_cert import self_signed_cert

CHUNK = 4800  # 100 ms of 24 kHz PCM16


def payload_part(data: bytes, data_type: str, state: str = "COMPLETE") -> bytes:
    return EventMessage(
        headers={
            ":message-type": "event",
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
            "DataType": data_type,
            "CompletionState": state,
        },
        payload=data,
    ).encode()


def model_stream_error(message: str, code: str) -> bytes:
    return EventMessage(
        headers={
            ":message-type": "exception",
            ":exception-type": "ModelStreamError",
            ":content-type": "application/json",
        },
        payload=json.dumps({"Message": message, "ErrorCode": code}).encode(),
    ).encode()


@dataclass
class StreamRecord:
    headers: dict[str, str]
    envelopes: list[dict[str, Any]] = field(default_factory=list)  # outer (signed) message headers
    parts: list[tuple[dict[str, Any], bytes]] = field(default_factory=list)  # inner PayloadPart headers, payload
    input_ended: bool = False  # the signed empty end frame arrived
    reset: bool = False


class _Stream:
    def __init__(self, record: StreamRecord) -> None:
        self.record = record
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.end_after_flush = False
        self.utterance = 0


class H2SageMakerServer:
    """Loopback HTTP/2 event-stream server; ``mode`` is ``ok`` or ``model_error``; ``alpn`` what TLS offers."""

    def __init__(
        self, mode: str = "ok", chunks: int = 4, end_on_close: bool = False, alpn: list[str] | None = None
    ) -> None:
        self.mode = mode
        self.end_on_close = end_on_close  # end the response on session.close instead of on the client's END_STREAM
        self.chunks = chunks
        self.streams: list[StreamRecord] = []
        self.alpn: list[str | None] = []
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="h2-sagemaker-")
        self.cert_path, key_path, self.ca_pem = self_signed_cert(Path(self._tmp.name))
        self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ssl.load_cert_chain(self.cert_path, key_path)
        self._ssl.set_alpn_protocols(alpn or ["h2"])
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._ssl)
        port = self._server.sockets[0].getsockname()[1]
        return f"https://localhost:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
        self._tmp.cleanup()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        ssl_obj = writer.get_extra_info("ssl_object")
        self.alpn.append(ssl_obj.selected_alpn_protocol() if ssl_obj else None)
        if self.alpn[-1] != "h2":
            self._tasks.discard(task)
            writer.close()
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        streams: dict[int, _Stream] = {}
        try:
            writer.write(conn.data_to_send())
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for ev in conn.receive_data(data):
                    match ev:
                        case h2.events.RequestReceived(stream_id=sid, headers=headers):
                            record = StreamRecord(headers={k: v for k, v in headers})
                            self.streams.append(record)
                            streams[sid] = _Stream(record)
                            conn.send_headers(
                                sid,
                                [
                                    (":status", "200"),
                                    ("content-type", "application/vnd.amazon.eventstream"),
                                    ("x-amzn-invoked-production-variant", "AllTraffic"),
                                ],
                            )
                        case h2.events.DataReceived(stream_id=sid, data=body, flow_controlled_length=n):
                            conn.acknowledge_received_data(n, sid)
                            if sid in streams:
                                self._on_body(conn, sid, streams[sid], body)
                        case h2.events.StreamEnded(stream_id=sid):
                            if sid in streams:
                                streams[sid].end_after_flush = True
                        case h2.events.StreamReset(stream_id=sid):
                            if sid in streams:
                                streams[sid].record.reset = True
                                del streams[sid]
                        case h2.events.ConnectionTerminated():
                            return
                for sid, st in list(streams.items()):
                    if self._flush(conn, sid, st):
                        del streams[sid]
                writer.write(conn.data_to_send())
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    def _flush(self, conn: h2.connection.H2Connection, sid: int, st: _Stream) -> bool:
        """Send what flow control allows; end the stream when asked and drained. True when the stream is done."""
        while st.outbuf:
            window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if window <= 0:
                return False
            conn.send_data(sid, bytes(st.outbuf[:window]))
            del st.outbuf[:window]
        if st.end_after_flush:
            conn.end_stream(sid)
            return True
        return False

    def _on_body(self, conn: h2.connection.H2Connection, sid: int, st: _Stream, body: bytes) -> None:
        st.inbuf += body
        while len(st.inbuf) >= 4:
            (total,) = struct.unpack_from("!I", st.inbuf)
            if len(st.inbuf) < total:
                return
            raw, st.inbuf = bytes(st.inbuf[:total]), st.inbuf[total:]
            envelope = Event.decode(BytesIO(raw))
            assert envelope is not None
            st.record.envelopes.append(dict(envelope.message.headers))
            if not envelope.message.payload:
                st.record.input_ended = True
                continue
            inner = Event.decode(BytesIO(envelope.message.payload))
            assert inner is not None
            st.record.parts.append((dict(inner.message.headers), inner.message.payload))
            self._on_client_message(st, inner.message.payload)

    def _on_client_message(self, st: _Stream, payload: bytes) -> None:
        msg = json.loads(payload)
        out = st.outbuf
        if msg["type"] == "input.done":
            n = st.utterance
            st.utterance += 1
            start = {"type": "audio.start", "utterance_index": n, "sentence_index": 0, "format": "pcm"}
            out += payload_part(json.dumps({**start, "sample_rate": 24000}).encode(), "UTF8")
            if self.mode == "model_error":
                out += model_stream_error("boom", "ModelError")
                st.end_after_flush = True
                return
            chunks = [struct.pack("<I", i) + bytes(CHUNK - 4) for i in range(self.chunks)]
            for c in chunks[:-1]:
                out += payload_part(c, "BINARY")
            last = chunks[-1]
            out += payload_part(last[:1000], "BINARY", "PARTIAL")  # one message in two parts
            out += payload_part(last[1000:], "BINARY", "COMPLETE")
            total = sum(map(len, chunks))
            done = {"type": "audio.done", "utterance_index": n, "total_bytes": total, "error": False}
            out += payload_part(json.dumps(done).encode(), "UTF8")
            out += payload_part(json.dumps({"type": "session.done", "utterance_index": n}).encode(), "UTF8")
        elif msg["type"] == "session.close" and self.end_on_close:
            st.end_after_flush = True
