"""A small fake vLLM-Omni streaming-TTS server (``/v1/audio/speech/stream``) for relay tests and the benchmark.

It follows the event protocol of vLLM-Omni 0.26.0 (contracts §3a): per ``input.done`` it sends ``audio.start``
(with ``sample_rate`` 24000 when ``stream_audio`` and pcm), PCM16 chunks progressively as binary frames,
``audio.done`` with ``total_bytes`` and ``session.done``. Each chunk starts with a little-endian uint32 sequence
number (per connection) so receivers can detect dropped or reordered chunks.

Test hooks in the utterance text: ``DROP`` aborts the TCP connection after two chunks, ``FLOOD`` streams
``flood_chunks`` chunks without pacing, ``MODELERR`` sends a JSON ``error`` event instead of audio, ``STALL`` sends
``audio.start`` and then nothing (a server that hangs mid-utterance). An empty flush is answered as vLLM-Omni 0.26.0
answers it: ``session.done`` with ``total_sentences: 0`` and no audio.
"""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass, field

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed


@dataclass
class FakeTTS:
    chunks: int = 5  # chunks per utterance
    chunk_samples: int = 2400  # 100 ms at 24 kHz
    interval: float = 0.002  # seconds between chunks (real time would be chunk_samples / 24000)
    first_chunk_delay: float = 0.0
    flood_chunks: int = 4000
    received: list[str] = field(default_factory=list)
    connections: int = 0
    server: Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self.server = await serve(
            self._handler, host, port, max_size=8 * 1024 * 1024, compression=None, close_timeout=1
        )
        port = self.server.sockets[0].getsockname()[1]
        return f"ws://{host}:{port}/v1/audio/speech/stream"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await asyncio.wait_for(self.server.wait_closed(), 5)

    def chunk(self, seq: int) -> bytes:
        body = bytearray(self.chunk_samples * 2)
        struct.pack_into("<I", body, 0, seq)
        return bytes(body)

    async def _handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        config: dict[str, object] | None = None
        text = ""
        utterance = 0
        seq = 0
        try:
            async for raw in ws:
                if isinstance(raw, bytes):
                    await ws.send(json.dumps({"type": "error", "message": "text frames only"}))
                    continue
                self.received.append(raw)
                msg = json.loads(raw)
                kind = msg.get("type")
                if kind == "session.config":
                    config = msg
                elif config is None:
                    await ws.send(json.dumps({"type": "error", "message": "session.config must come first"}))
                elif kind == "input.text":
                    text += msg["text"]
                elif kind == "input.done":
                    seq = await self._utterance(ws, config, text, utterance, seq)
                    utterance += 1
                    text = ""
                elif kind == "session.close":
                    await ws.close(1000)
                    return
        except ConnectionClosed:
            return

    async def _utterance(self, ws: ServerConnection, config: dict[str, object], text: str, index: int, seq: int) -> int:
        if not text.strip():
            await ws.send(json.dumps({"type": "session.done", "utterance_index": index, "total_sentences": 0}))
            return seq
        if "MODELERR" in text:
            await ws.send(json.dumps({"type": "error", "message": "model failed on this text"}))
            return seq
        fmt = config.get("response_format", "wav")
        start: dict[str, object] = {
            "type": "audio.start",
            "utterance_index": index,
            "sentence_index": 0,
            "sentence_text": text,
            "format": fmt,
        }
        if config.get("stream_audio") and fmt == "pcm":
            start["sample_rate"] = 24000
        await ws.send(json.dumps(start))
        if "STALL" in text:
            await ws.wait_closed()
            return seq
        if self.first_chunk_delay:
            await asyncio.sleep(self.first_chunk_delay)
        total = 0
        t0 = asyncio.get_running_loop().time()
        n = self.flood_chunks if "FLOOD" in text else self.chunks
        for i in range(n):
            if "DROP" in text and i == 2:
                ws.transport.abort()
                return seq
            data = self.chunk(seq)
            seq += 1
            await ws.send(data)
            total += len(data)
            if self.interval and "FLOOD" not in text:  # absolute schedule: no drift (real-time pacing)
                await asyncio.sleep(max(0.0, t0 + (i + 1) * self.interval - asyncio.get_running_loop().time()))
        await ws.send(
            json.dumps(
                {
                    "type": "audio.done",
                    "utterance_index": index,
                    "sentence_index": 0,
                    "total_bytes": total,
                    "error": False,
                }
            )
        )
        await ws.send(json.dumps({"type": "session.done", "utterance_index": index, "total_sentences": 1}))
        return seq
