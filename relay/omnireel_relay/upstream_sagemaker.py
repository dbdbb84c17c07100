"""Upstream over the SageMaker HTTP/2 bidirectional stream (``aws-sdk-sagemaker-runtime-http2`` 0.12.0).

- One ``invoke_endpoint_with_bidirectional_stream`` per client session, ``model_invocation_path`` slashless.
- Each client WebSocket message becomes one ``RequestPayloadPart(data_type="UTF8", completion_state="COMPLETE")``.
- Response ``UTF8`` parts become text frames, ``BINARY`` parts binary frames; ``PARTIAL`` parts are joined until
  ``COMPLETE`` so one upstream WebSocket message stays one frame (the relay never re-chunks audio).
- a part's ``data_type`` is compared case-insensitively ("UTF8", "utf8": text; anything else: binary), as the AWS
  sample client (sagemaker_bidi_tts.py) does;
- ``ModelStreamError`` / ``InternalStreamFailure`` (which the SDK's receiver *raises*, it does not return them as
  events) and other SDK exceptions raise :class:`UpstreamError` (→ ``error``, 1011).
- No per-frame timeout around ``receive()`` (it can corrupt the stream); the session's single deadline bounds it.

Transport: the SDK's config defaults ``transport`` to ``AIOHTTPClient()`` (HTTP/1.1), which cannot carry a duplex
event stream (smithy_core raises ``UnsupportedTransportError``) and is not what SageMaker's :8443 endpoint speaks. The
relay always passes an ``AWSCRTHTTPClient`` (``awscrt``) configured with ``force_http_2=True``: ALPN offers ``h2``
and a connection that negotiates anything else is refused instead of silently downgraded. The CRT client keeps one
connection per (scheme, host, port) and multiplexes every session's stream over it. ``sagemaker_ca_bundle`` (a PEM
file) replaces the system trust store; it exists for TLS-intercepting proxies and the local HTTP/2 test server.

Credentials: :class:`BotocoreCredentialsResolver` wraps botocore's default provider chain (env, web identity,
**ECS container credentials of the task role**, IMDS...). Those are ``RefreshableCredentials``: botocore refreshes
them before they expire, so nothing frozen is ever copied into the environment. (smithy_aws_core 0.12's default chain
only covers the ECS task role when the separate ``aws-credentials-http`` package is installed, and its
``ContainerCredentialsResolver`` is deprecated and refreshes only after expiry.)
"""

from __future__ import annotations

import asyncio
import logging
from copy import deepcopy
from typing import Any

from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure,
    InvokeEndpointWithBidirectionalStreamInput,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    ResponseStreamEventUnknown,
)
from awscrt import io as crt_io
from smithy_aws_core.identity import AWSCredentialsIdentity
from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

from .settings import Settings
from .upstream import UpstreamError

log = logging.getLogger(__name__)


def endpoint_uri(region: str) -> str:
    return f"https://runtime.sagemaker.{region}.amazonaws.com:8443"


class HTTP2Transport(AWSCRTHTTPClient):
    """``AWSCRTHTTPClient`` that insists on HTTP/2 and optionally trusts a given CA bundle (PEM bytes).

    ``__deepcopy__`` is overridden because the SDK deep-copies its config (transport included) once at client set-up,
    and the base class's copy would rebuild the TLS context from the system trust store.

    ``_get_connection`` is serialized: smithy-http 0.6 checks its one-connection-per-host pool without a lock, so a
    burst of sessions opening at once would each dial a connection and all but the last would be dropped from the
    pool (never closed by ``close()``). With the lock the first dial is shared and every stream multiplexes over it.
    """

    def __init__(
        self,
        eventloop: Any | None = None,
        client_config: AWSCRTHTTPClientConfig | None = None,
        ca_pem: bytes | None = None,
    ) -> None:
        super().__init__(eventloop=eventloop, client_config=client_config or AWSCRTHTTPClientConfig(force_http_2=True))
        self.ca_pem = ca_pem
        self._connect_lock = asyncio.Lock()
        if ca_pem is not None:
            options = crt_io.TlsContextOptions()
            options.override_default_trust_store(ca_pem)
            self._tls_ctx = crt_io.ClientTlsContext(options)

    async def _get_connection(self, url: Any) -> Any:
        async with self._connect_lock:
            return await super()._get_connection(url)

    @property
    def force_http_2(self) -> bool:
        return self._config.force_http_2

    def __deepcopy__(self, memo: Any) -> HTTP2Transport:
        return HTTP2Transport(eventloop=self._eventloop, client_config=deepcopy(self._config), ca_pem=self.ca_pem)


def make_transport(ca_bundle: str | None = None) -> HTTP2Transport:
    """The SDK transport for SageMaker's bidirectional stream: CRT, HTTP/2 only."""
    ca_pem = None
    if ca_bundle:
        with open(ca_bundle, "rb") as f:
            ca_pem = f.read()
    return HTTP2Transport(ca_pem=ca_pem)


class BotocoreCredentialsResolver:
    """smithy ``IdentityResolver`` backed by botocore's refreshing credential chain (ECS task role, ...)."""

    def __init__(self, botocore_session: Any | None = None) -> None:
        if botocore_session is None:
            import botocore.session

            botocore_session = botocore.session.get_session()
        self._session = botocore_session
        self._credentials: Any | None = None

    def _frozen(self) -> AWSCredentialsIdentity:
        if self._credentials is None:
            self._credentials = self._session.get_credentials()
            if self._credentials is None:
                raise UpstreamError("credentials", "no AWS credentials found (expected the ECS task role)")
        # get_frozen_credentials() refreshes RefreshableCredentials when they are close to expiry.
        frozen = self._credentials.get_frozen_credentials()
        expiry = getattr(self._credentials, "_expiry_time", None)
        return AWSCredentialsIdentity(
            access_key_id=frozen.access_key,
            secret_access_key=frozen.secret_key,
            session_token=frozen.token,
            expiration=expiry,
        )

    async def get_identity(self, *, properties: Any) -> AWSCredentialsIdentity:
        # May perform an HTTP call (container credentials endpoint) when refreshing: keep it off the event loop.
        return await asyncio.to_thread(self._frozen)

    async def invalidate(self) -> None:
        self._credentials = None


class SageMakerUpstream:
    def __init__(self, stream: Any, receiver: Any) -> None:
        self._stream = stream
        self._receiver = receiver
        self._closed = False
        self._input_closed = False
        self.close_code: int | None = None
        self.close_reason = ""

    async def send_text(self, text: str) -> None:
        part = RequestPayloadPart(bytes_=text.encode("utf-8"), data_type="UTF8", completion_state="COMPLETE")
        try:
            await self._stream.input_stream.send(RequestStreamEventPayloadPart(value=part))
        except Exception as exc:  # noqa: BLE001 - any SDK/transport failure ends the session
            raise UpstreamError("dropped", f"SageMaker stream send failed: {type(exc).__name__}: {exc}") from None

    async def end_input(self) -> None:
        """Send the signed end-of-input frame (HTTP/2 END_STREAM) right after ``session.close``.

        Half-closing before the endpoint ends the response matters: once the response has ended, CRT treats the
        HTTP/2 stream as complete and a late end frame fails inside awscrt's body-writer task.
        """
        if self._input_closed:
            return
        self._input_closed = True
        try:
            async with asyncio.timeout(2):
                await self._stream.input_stream.close()
        except Exception:
            log.debug("SageMaker input stream close failed", exc_info=True)

    async def receive(self) -> str | bytes | None:
        pending = bytearray()
        pending_type: str | None = None
        while True:
            try:
                event = await self._receiver.receive()
            except ModelStreamError as err:  # the SDK raises modeled stream exceptions from receive()
                raise UpstreamError("model_error", f"model stream error {err.error_code}: {err.message}") from None
            except InternalStreamFailure as err:
                raise UpstreamError("internal", f"SageMaker internal stream failure: {err.message}") from None
            except Exception as exc:  # noqa: BLE001
                raise UpstreamError("dropped", f"SageMaker stream failed: {type(exc).__name__}: {exc}") from None
            match event:
                case None:
                    self.close_code = 1000
                    return None
                case ResponseStreamEventPayloadPart(value=part):
                    pending += part.bytes_ or b""
                    pending_type = pending_type or part.data_type
                    if part.completion_state == "PARTIAL":
                        continue
                    data = bytes(pending)
                    if (pending_type or "").upper() == "UTF8":  # any casing, as the AWS sample client compares
                        return data.decode("utf-8", errors="replace")
                    return data
                # 0.12.0's receiver raises these (above); kept in case a release returns them as events instead
                case ResponseStreamEventModelStreamError(value=err):
                    raise UpstreamError("model_error", f"model stream error {err.error_code}: {err.message}")
                case ResponseStreamEventInternalStreamFailure(value=err):
                    raise UpstreamError("internal", f"SageMaker internal stream failure: {err.message}")
                case ResponseStreamEventUnknown(tag=tag):
                    log.warning("unknown SageMaker stream event ignored", extra={"tag": tag})
                case _:
                    log.warning("unexpected SageMaker stream event ignored", extra={"event": type(event).__name__})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.end_input()
        try:
            async with asyncio.timeout(2):
                await self._receiver.close()
        except Exception:
            log.debug("SageMaker output stream close failed", exc_info=True)


class SageMakerUpstreamFactory:
    def __init__(self, client: Any, endpoint_name: str, model_invocation_path: str, target_variant: str | None) -> None:
        self._client = client
        self._endpoint = endpoint_name
        self._path = model_invocation_path
        self._variant = target_variant

    @classmethod
    async def create(cls, settings: Settings, credentials_resolver: Any | None = None) -> SageMakerUpstreamFactory:
        from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
        from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config

        region = settings.region
        if not region:
            raise ValueError("set OMNIREEL_RELAY_SAGEMAKER_REGION or AWS_REGION for the SageMaker upstream")
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
            endpoint_uri=settings.sagemaker_endpoint_uri or endpoint_uri(region),
            region=region,
            aws_credentials_identity_resolver=credentials_resolver or BotocoreCredentialsResolver(),
            transport=make_transport(settings.sagemaker_ca_bundle),
        )
        assert settings.sagemaker_endpoint is not None
        return cls(
            AsyncSageMakerRuntimeHTTP2Client(config=config),
            settings.sagemaker_endpoint,
            settings.model_invocation_path,
            settings.sagemaker_target_variant,
        )

    def request(self) -> InvokeEndpointWithBidirectionalStreamInput:
        return InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=self._endpoint, model_invocation_path=self._path, target_variant=self._variant
        )

    async def open(self, session_id: str) -> SageMakerUpstream:
        try:
            stream = await self._client.invoke_endpoint_with_bidirectional_stream(input=self.request())
            _, receiver = await stream.await_output()
        except UpstreamError:
            raise
        except Exception as exc:  # noqa: BLE001 - ValidationError, ModelError, auth, network...
            raise UpstreamError("connect", f"cannot open the SageMaker stream: {type(exc).__name__}: {exc}") from None
        return SageMakerUpstream(stream, receiver)

    async def aclose(self) -> None:
        close = getattr(self._client, "close", None)
        if close is not None:
            try:
                await close()
            except Exception:
                log.debug("SageMaker client close failed", exc_info=True)
