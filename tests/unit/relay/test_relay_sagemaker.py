"""SageMaker upstream against faithful fakes of the SDK's stream objects (fast, failure modes).

The real SDK + CRT HTTP/2 transport are exercised end to end in
``tests/integration/relay/test_relay_sagemaker_http2.py`` against a local HTTP/2 event-stream server. These fakes
reproduce the SDK 0.12.0 surface the relay uses — ``client.invoke_endpoint_with_bidirectional_stream(input=...)``
returning a stream with ``input_stream.send/close`` and ``await_output()`` returning ``(output, receiver)`` whose
``receive()`` yields the SDK's real event classes, ``None`` at the end, and (like the real ``AWSEventReceiver``)
*raises* the ``ModelStreamError`` / ``InternalStreamFailure`` carried by an exception event — and the tests assert
exactly what the relay sends: the SDK's own ``InvokeEndpointWithBidirectionalStreamInput`` and
``RequestStreamEventPayloadPart(RequestPayloadPart(bytes_, "UTF8", "COMPLETE"))`` objects.
"""

from __future__ import annotations

import asyncio
import copy
import json
import struct
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure,
    InvokeEndpointWithBidirectionalStreamInput,
    InvokeEndpointWithBidirectionalStreamOutput,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponsePayloadPart,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    ResponseStreamEventUnknown,
)

from omnireel_relay.auth import Authenticator
from omnireel_relay.server import RelayServer
from omnireel_relay.settings import Settings
from omnireel_relay.upstream_sagemaker import (
    BotocoreCredentialsResolver,
    HTTP2Transport,
    SageMakerUpstreamFactory,
    endpoint_uri,
)
from tests.support.relay.relay_harness import CONFIG, TOKEN, events, frames_until_closed, open_client, run, speak
from tests.support.relay.tls_cert import self_signed_cert


def _part(data: bytes, data_type: str, state: str = "COMPLETE") -> ResponseStreamEventPayloadPart:
    return ResponseStreamEventPayloadPart(
        value=ResponsePayloadPart(bytes_=data, data_type=data_type, completion_state=state)
    )


class FakeReceiver:
    def __init__(self) -> None:
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False

    async def receive(self) -> Any:
        event = await self.events.get()
        value = getattr(event, "value", None)
        if isinstance(value, Exception):  # smithy_aws_event_stream's AWSEventReceiver does exactly this
            raise value
        return event

    async def close(self) -> None:
        self.closed = True


class FakePublisher:
    def __init__(self, model: FakeModel) -> None:
        self.sent: list[Any] = []
        self.closed = False
        self._model = model

    async def send(self, event: Any) -> None:
        assert not self.closed
        self.sent.append(event)
        self._model.on_event(event)

    async def close(self) -> None:
        self.closed = True


class FakeModel:
    """Behaves like vLLM-Omni behind SageMaker: UTF8 JSON parts in, UTF8 events + BINARY PCM parts out."""

    def __init__(self, receiver: FakeReceiver, mode: str) -> None:
        self.receiver = receiver
        self.mode = mode
        self.n = 0

    def on_event(self, event: RequestStreamEventPayloadPart) -> None:
        msg = json.loads(event.value.bytes_)
        q = self.receiver.events
        if msg["type"] == "input.done":
            q.put_nowait(
                _part(
                    json.dumps(
                        {
                            "type": "audio.start",
                            "utterance_index": self.n,
                            "sentence_index": 0,
                            "format": "pcm",
                            "sample_rate": 24000,
                        }
                    ).encode(),
                    "UTF8",
                )
            )
            if self.mode == "model_error":
                q.put_nowait(
                    ResponseStreamEventModelStreamError(value=ModelStreamError(message="boom", error_code="ModelError"))
                )
                return
            if self.mode == "internal":
                q.put_nowait(ResponseStreamEventInternalStreamFailure(value=InternalStreamFailure(message="oops")))
                return
            q.put_nowait(ResponseStreamEventUnknown(tag="SomethingNew"))
            chunks = [struct.pack("<I", i) + bytes(4796) for i in range(4)]
            for c in chunks[:3]:
                q.put_nowait(_part(c, "BINARY"))
            # a message split into PARTIAL parts must reach the client as ONE frame
            q.put_nowait(_part(chunks[3][:1000], "BINARY", "PARTIAL"))
            q.put_nowait(_part(chunks[3][1000:], "BINARY", "COMPLETE"))
            total = sum(map(len, chunks))
            q.put_nowait(
                _part(
                    json.dumps(
                        {"type": "audio.done", "utterance_index": self.n, "total_bytes": total, "error": False}
                    ).encode(),
                    "UTF8",
                )
            )
            q.put_nowait(_part(json.dumps({"type": "session.done", "utterance_index": self.n}).encode(), "UTF8"))
            self.n += 1
        elif msg["type"] == "session.close":
            q.put_nowait(None)  # the SDK's end of stream


class FakeStream:
    def __init__(self, mode: str) -> None:
        self.receiver = FakeReceiver()
        self.model = FakeModel(self.receiver, mode)
        self.input_stream = FakePublisher(self.model)

    async def await_output(self) -> tuple[InvokeEndpointWithBidirectionalStreamOutput, FakeReceiver]:
        return InvokeEndpointWithBidirectionalStreamOutput(), self.receiver


class FakeClient:
    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.inputs: list[InvokeEndpointWithBidirectionalStreamInput] = []
        self.streams: list[FakeStream] = []

    async def invoke_endpoint_with_bidirectional_stream(
        self, input: InvokeEndpointWithBidirectionalStreamInput
    ) -> FakeStream:
        self.inputs.append(input)
        if self.mode == "refused":
            raise ConnectionRefusedError("no route")
        stream = FakeStream(self.mode)
        self.streams.append(stream)
        return stream


async def _relay(client: FakeClient) -> RelayServer:
    settings = Settings.from_env(
        {},
        token=TOKEN,
        host="127.0.0.1",
        port=0,
        upstream="sagemaker",
        sagemaker_endpoint="omnireel-tts",
        sagemaker_region="us-west-2",
    )
    server = RelayServer(
        settings,
        Authenticator(TOKEN),
        SageMakerUpstreamFactory(client, "omnireel-tts", settings.model_invocation_path, None),
    )
    await server.start()
    return server


def test_sagemaker_upstream_sends_exact_sdk_events_and_relays_parts() -> None:
    async def main() -> None:
        client = FakeClient()
        server = await _relay(client)
        try:
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            for _ in range(2):
                frames = await speak(ws, "Hello from SageMaker.")
                assert events(frames) == ["audio.start", "pcm", "pcm", "pcm", "pcm", "audio.done", "session.done"]
                pcm = [f for f in frames if isinstance(f, bytes)]
                assert [struct.unpack_from("<I", p)[0] for p in pcm] == [0, 1, 2, 3]
                assert json.loads(frames[-2])["total_bytes"] == sum(map(len, pcm))
                assert json.loads(frames[0])["sample_rate"] == 24000
            await ws.send(json.dumps({"type": "session.close"}))
            await frames_until_closed(ws)
            assert ws.close_code == 1000

            assert client.inputs == [
                InvokeEndpointWithBidirectionalStreamInput(
                    endpoint_name="omnireel-tts", model_invocation_path="v1/audio/speech/stream"
                )
            ]  # one stream per session; slashless path
            [stream] = client.streams
            sent_texts = [
                json.dumps(CONFIG),
                *[
                    json.dumps({"type": "input.text", "text": "Hello from SageMaker."}),
                    json.dumps({"type": "input.done"}),
                ]
                * 2,
                json.dumps({"type": "session.close"}),
            ]
            assert stream.input_stream.sent == [
                RequestStreamEventPayloadPart(
                    value=RequestPayloadPart(bytes_=t.encode(), data_type="UTF8", completion_state="COMPLETE")
                )
                for t in sent_texts
            ]
            assert [e.value.bytes_ for e in stream.input_stream.sent] == [t.encode() for t in sent_texts]
            async with asyncio.timeout(5):
                while server.sessions:
                    await asyncio.sleep(0.01)
            assert stream.input_stream.closed and stream.receiver.closed
        finally:
            await server.close()

    run(main())


def test_model_stream_error_and_internal_failure_become_error_events() -> None:
    async def main() -> None:
        for mode, code, text in (
            ("model_error", "upstream_model_error", "model stream error ModelError: boom"),
            ("internal", "upstream_internal", "internal stream failure: oops"),
        ):
            server = await _relay(FakeClient(mode))
            try:
                ws = await open_client(server)
                await ws.send(json.dumps(CONFIG))
                await ws.send(json.dumps({"type": "input.text", "text": "x"}))
                await ws.send(json.dumps({"type": "input.done"}))
                frames = await frames_until_closed(ws)
                assert events(frames) == ["audio.start", "error"]
                err = json.loads(frames[-1])
                assert err["code"] == code and text in err["message"]
                assert ws.close_code == 1011
            finally:
                await server.close()

    run(main())


def test_stream_open_failure_becomes_error_event() -> None:
    async def main() -> None:
        server = await _relay(FakeClient("refused"))
        try:
            ws = await open_client(server)
            frames = await frames_until_closed(ws)
            assert events(frames) == ["error"]
            assert "cannot open the SageMaker stream" in json.loads(frames[0])["message"]
            assert ws.close_code == 1011
        finally:
            await server.close()

    run(main())


def test_factory_builds_real_sdk_client_with_refreshing_resolver() -> None:
    async def main() -> None:
        from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client

        settings = Settings.from_env(
            {}, token=TOKEN, upstream="sagemaker", sagemaker_endpoint="e", sagemaker_region="eu-west-1"
        )
        resolver = BotocoreCredentialsResolver(botocore_session=object())
        factory = await SageMakerUpstreamFactory.create(settings, credentials_resolver=resolver)
        assert isinstance(factory._client, AsyncSageMakerRuntimeHTTP2Client)
        assert factory._client._config.endpoint_uri == "https://runtime.sagemaker.eu-west-1.amazonaws.com:8443"
        assert factory._client._config.aws_credentials_identity_resolver is resolver
        transport = factory._client._config.transport
        assert isinstance(transport, HTTP2Transport) and transport.force_http_2 and transport.ca_pem is None
        assert transport.SUPPORTS_DUPLEX_STREAMING is True
        with tempfile.TemporaryDirectory() as tmp:
            _, _, pem = self_signed_cert(Path(tmp))
        copied = copy.deepcopy(HTTP2Transport(ca_pem=pem))  # the SDK deep-copies its config at set-up
        assert isinstance(copied, HTTP2Transport) and copied.ca_pem == pem and copied.force_http_2
        assert endpoint_uri("us-east-1") == "https://runtime.sagemaker.us-east-1.amazonaws.com:8443"
        await factory.aclose()

    run(main())


def test_botocore_resolver_refreshes_instead_of_freezing() -> None:
    """The ECS task role's credentials rotate; each resolution returns the current (refreshed) set."""
    from botocore.credentials import RefreshableCredentials

    calls = {"n": 0}

    def refresh() -> dict[str, str]:
        calls["n"] += 1
        # already inside botocore's mandatory-refresh window, so every access refreshes
        expiry = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
        return {"access_key": f"AKIA{calls['n']}", "secret_key": "s", "token": f"t{calls['n']}", "expiry_time": expiry}

    creds = RefreshableCredentials.create_from_metadata(refresh(), refresh, "container-role")

    class Session:
        def get_credentials(self) -> RefreshableCredentials:
            return creds

    resolver = BotocoreCredentialsResolver(botocore_session=Session())

    async def main() -> tuple[str, str]:
        a = await resolver.get_identity(properties={})
        b = await resolver.get_identity(properties={})
        return a.access_key_id, b.access_key_id

    first, second = run(main())
    assert first != second and second.startswith("AKIA")


def test_payload_data_type_is_compared_case_insensitively() -> None:
    """The AWS sample client treats any casing of "UTF8" as a text frame (``data_type.upper() != "UTF8"``)."""
    from omnireel_relay.upstream_sagemaker import SageMakerUpstream

    async def main() -> None:
        receiver = FakeReceiver()
        upstream = SageMakerUpstream(stream=None, receiver=receiver)
        for data_type in ("UTF8", "utf8", "Utf8"):
            await receiver.events.put(_part(b'{"type": "audio.done"}', data_type))
            assert await upstream.receive() == '{"type": "audio.done"}'
        await receiver.events.put(_part(b"\x01\x02", "BINARY"))
        assert await upstream.receive() == b"\x01\x02"
        await receiver.events.put(_part(b'{"type": "session', "utf8", "PARTIAL"))
        await receiver.events.put(_part(b'.done"}', "utf8"))
        assert await upstream.receive() == '{"type": "session.done"}'

    run(main())
