"""Relay settings, read once from ``OMNIREEL_RELAY_*`` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ENV_PREFIX = "OMNIREEL_RELAY_"


class Settings(BaseModel):
    """All knobs of the relay. Field ``foo_bar`` is read from ``OMNIREEL_RELAY_FOO_BAR``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=0, le=65535)

    # --- upstream -------------------------------------------------------------------------------
    upstream: Literal["websocket", "sagemaker"] = "websocket"
    upstream_url: str = "ws://127.0.0.1:8091/v1/audio/speech/stream"
    upstream_connect_timeout: float = Field(default=10.0, gt=0)
    # An utterance in flight (input.done forwarded, its session.done not yet back) with no upstream frame for this
    # long ends the session with 1011. This, not WebSocket pings, is how a hung upstream is detected: uvicorn (which
    # serves vLLM-Omni and the emulator) stops reading its socket while the app streams, so pings go unanswered.
    upstream_progress_timeout: float = Field(default=120.0, gt=0)
    sagemaker_endpoint: str | None = None
    sagemaker_region: str | None = None
    sagemaker_endpoint_uri: str | None = None  # default https://runtime.sagemaker.{region}.amazonaws.com:8443
    sagemaker_target_variant: str | None = None
    sagemaker_ca_bundle: str | None = None  # PEM file replacing the system trust store (proxies, local tests)
    model_invocation_path: str = "v1/audio/speech/stream"

    # --- auth -----------------------------------------------------------------------------------
    token: str | None = Field(default=None, repr=False)
    token_secret_id: str | None = None  # Secrets Manager secret id/ARN (SecretString or {"token": ...})
    token_ssm_parameter: str | None = None  # SSM SecureString parameter name

    # --- limits ---------------------------------------------------------------------------------
    max_message_bytes: int = Field(default=4 * 1024 * 1024, gt=0)  # any client frame (session.config)
    max_event_bytes: int = Field(default=128 * 1024, gt=0)  # any client event other than session.config
    max_text_chars: int = Field(default=5000, gt=0)  # text buffered per utterance (between input.done)
    max_session_seconds: float = Field(default=900.0, gt=0)
    max_sessions: int = Field(default=200, gt=0)
    send_queue_frames: int = Field(default=512, gt=0)  # per-session frames waiting for a slow client
    send_queue_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    # client events waiting for the utterance in progress upstream to finish (see session.py)
    max_held_events: int = Field(default=1024, gt=0)
    max_held_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    write_limit: int = Field(default=64 * 1024, gt=0)  # websockets write buffer high-water mark
    close_timeout: float = Field(default=2.0, gt=0)

    # --- lifecycle / observability -------------------------------------------------------------
    drain_seconds: float = Field(default=30.0, ge=0)
    log_level: str = "INFO"
    emf: bool = False  # also print CloudWatch Embedded Metric Format lines per session
    emf_namespace: str = "omnireel/relay"
    metrics_public: bool = False  # False: GET /metrics needs the bearer token (the ALB also blocks /metrics)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.upstream == "sagemaker" and not self.sagemaker_endpoint:
            raise ValueError("OMNIREEL_RELAY_SAGEMAKER_ENDPOINT is required when OMNIREEL_RELAY_UPSTREAM=sagemaker")
        if self.model_invocation_path.startswith("/"):
            raise ValueError("model_invocation_path must not start with '/' (SageMaker answers HTTP 400)")
        if not (self.token or self.token_secret_id or self.token_ssm_parameter):
            raise ValueError(
                "set OMNIREEL_RELAY_TOKEN (local) or OMNIREEL_RELAY_TOKEN_SECRET_ID / "
                "OMNIREEL_RELAY_TOKEN_SSM_PARAMETER (AWS): the relay never runs unauthenticated"
            )
        return self

    @property
    def region(self) -> str | None:
        return self.sagemaker_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is not None and raw != "":
                values[name] = raw
        values.update(overrides)
        return cls.model_validate(values)
