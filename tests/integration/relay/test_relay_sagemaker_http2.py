"""The SageMaker upstream end to end through the REAL SDK and the REAL HTTP/2 transport.

client WebSocket → relay → ``aws-sdk-sagemaker-runtime-http2`` 0.12.0 → ``AWSCRTHTTPClient`` (awscrt, HTTP/2, TLS,
ALPN ``h2``) → a local HTTP/2 server (``tests/support/relay/h2_sagemaker_server.py``, pure-Python ``h2``) that speaks
AWS event-stream framing, records the SigV4 headers and event signatures without verifying them, and answers like
vLLM-Omni behind SageMaker. The relay is pointed at it with ``sagemaker_endpoint_uri`` and trusts its throwaway
self-signed certificate with ``sagemaker_ca_bundle``. What stays unverified here: real SigV4 validation and
SageMaker's own framing quirks (e.g. when it ends the response relative to the client's END_STREAM).
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest

pytest.importorskip("h2", reason="the local HTTP/2 event-stream server needs the pure-Python h2 package")
pytest.importorskip("awscrt", reason="the relay's HTTP/2 transport needs awscrt")

from smithy_aws_core.identity import AWSCredentialsIdentity

from omnireel_relay.auth import Authenticator
from omnireel_relay.server import RelayServer
from omnireel_relay.settings import Settings
from omnireel_relay.upstream_sagemaker import SageMakerUpstreamFactory
from tests.support.relay.h2_sagemaker_server import CHUNK, H2SageMakerServer
from tests.support.relay.relay_harness import CONFIG, TOKEN, events, frames_until_closed, open_client, run, speak


class StaticCredentials:
    async def get_identity(self, *, properties: Any) -> AWSCredentialsIdentity:
        return AWSCredentialsIdentity(access_key_id="AKIDLOCALTEST", secret_access_key="secret", session_token="tok")


async def _relay(upstream: H2SageMakerServer, url: str) -> RelayServer:
    settings = Settings.from_env(
        {},
        token=TOKEN,
        host="127.0.0.1",
        port=0,
        upstream="sagemaker",
        sagemaker_endpoint="omnireel-tts",
        sagemaker_region="us-west-2",
        sagemaker_endpoint_uri=url,
        sagemaker_ca_bundle=str(upstream.cert_path),
    )
    factory = await SageMakerUpstreamFactory.create(settings, credentials_resolver=StaticCredentials())
    server = RelayServer(settings, Authenticator(TOKEN), factory)
    await server.start()
    return server


async def _wait_sessions_gone(server: RelayServer) -> None:
    async with asyncio.timeout(5):
        while server.sessions:
            await asyncio.sleep(0.01)


async def _session(server: RelayServer, text: str) -> None:
    ws = await open_client(server)
    await ws.send(json.dumps(CONFIG))
    for _ in range(2):
        frames = await speak(ws, text)
        assert events(frames) == ["audio.start", "pcm", "pcm", "pcm", "pcm", "audio.done", "session.done"]
        assert json.loads(frames[0])["sample_rate"] == 24000
        pcm = [f for f in frames if isinstance(f, bytes)]
        assert [len(p) for p in pcm] == [CHUNK] * 4  # the PARTIAL+COMPLETE pair arrives as one frame
        assert [struct.unpack_from("<I", p)[0] for p in pcm] == [0, 1, 2, 3]
        assert json.loads(frames[-2])["total_bytes"] == sum(map(len, pcm))
    await ws.send(json.dumps({"type": "session.close"}))
    await frames_until_closed(ws, timeout=10)
    assert ws.close_code == 1000


@pytest.mark.parametrize("end_on_close", [False, True], ids=["endpoint-waits-for-end-stream", "endpoint-ends-first"])
def test_real_sdk_over_http2_two_sessions_multiplexed(end_on_close: bool) -> None:
    async def main() -> None:
        upstream = H2SageMakerServer(end_on_close=end_on_close)
        url = await upstream.start()
        server = await _relay(upstream, url)
        try:
            texts = ["Hello over HTTP/2.", "Second session, same connection."]
            await asyncio.gather(*(_session(server, t) for t in texts))
            await _wait_sessions_gone(server)
        finally:
            await server.close()
            await upstream.stop()

        # HTTP/2 negotiated by ALPN; both sessions were streams on ONE connection
        assert upstream.alpn == ["h2"] and upstream.connections == 1
        assert len(upstream.streams) == 2
        for rec in upstream.streams:
            h = rec.headers
            assert h[":method"] == "POST" and h[":scheme"] == "https"
            assert h[":path"].split("?")[0] == "/endpoints/omnireel-tts/invocations-bidirectional-stream"
            assert h["x-amzn-sagemaker-model-invocation-path"] == "v1/audio/speech/stream"
            assert h["content-type"] == "application/vnd.amazon.eventstream"
            assert h["x-amz-content-sha256"] == "STREAMING-AWS4-HMAC-SHA256-EVENTS"
            assert h["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDLOCALTEST/")
            assert "/us-west-2/sagemaker/aws4_request" in h["authorization"]
            assert h["x-amz-security-token"] == "tok"
            assert "x-amzn-sagemaker-target-variant" not in h
            # every request message is a signed envelope around one COMPLETE UTF8 PayloadPart
            assert all(":chunk-signature" in e and ":date" in e for e in rec.envelopes)
            assert all(
                hdrs[":event-type"] == "PayloadPart"
                and hdrs["DataType"] == "UTF8"
                and hdrs["CompletionState"] == "COMPLETE"
                for hdrs, _ in rec.parts
            )
            sent = [json.loads(p)["type"] for _, p in rec.parts]
            assert sent == ["session.config", *["input.text", "input.done"] * 2, "session.close"]
            assert json.loads(rec.parts[0][1]) == CONFIG
            if not end_on_close:
                # the relay half-closed right after session.close (signed empty end frame + END_STREAM)
                assert rec.input_ended and not rec.reset

    run(main(), timeout=40)


def test_real_sdk_model_stream_error_becomes_error_event() -> None:
    async def main() -> None:
        upstream = H2SageMakerServer(mode="model_error")
        url = await upstream.start()
        server = await _relay(upstream, url)
        try:
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "x"}))
            await ws.send(json.dumps({"type": "input.done"}))
            frames = await frames_until_closed(ws, timeout=10)
            assert events(frames) == ["audio.start", "error"]
            err = json.loads(frames[-1])
            assert err["code"] == "upstream_model_error"
            assert "model stream error ModelError: boom" in err["message"]
            assert ws.close_code == 1011
            await _wait_sessions_gone(server)
        finally:
            await server.close()
            await upstream.stop()

    run(main(), timeout=30)


def test_http1_only_endpoint_is_refused_not_downgraded() -> None:
    """``force_http_2``: an endpoint that only negotiates http/1.1 is an upstream connect error, never a fallback."""

    async def main() -> None:
        upstream = H2SageMakerServer(alpn=["http/1.1"])
        url = await upstream.start()
        server = await _relay(upstream, url)
        try:
            ws = await open_client(server)
            frames = await frames_until_closed(ws, timeout=10)
            assert events(frames) == ["error"]
            message = json.loads(frames[0])["message"]
            assert "cannot open the SageMaker stream" in message and "HTTP/2 could not be negotiated" in message
            assert ws.close_code == 1011
            assert upstream.streams == []
        finally:
            await server.close()
            await upstream.stop()

    run(main(), timeout=30)
