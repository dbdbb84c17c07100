"""The interface every upstream (TTS server connection) implements: one instance per client session."""

from __future__ import annotations

from typing import Protocol


class UpstreamError(Exception):
    """The upstream failed (connect refused, dropped mid-stream, model stream error); ends the session."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # short metric label: connect, dropped, model_error, internal
        self.message = message


class Upstream(Protocol):
    close_code: int | None  # how the upstream ended the stream, when it ended it normally
    close_reason: str

    async def send_text(self, text: str) -> None:
        """Forward one client JSON event (one complete message)."""

    async def end_input(self) -> None:
        """The client sent ``session.close``: nothing more will be forwarded (half-close where the transport has it)."""

    async def receive(self) -> str | bytes | None:
        """Next upstream frame: ``str`` = JSON event, ``bytes`` = audio. ``None`` = the upstream ended cleanly."""

    async def close(self) -> None:
        """Release the stream; idempotent, never raises."""


class UpstreamFactory(Protocol):
    async def open(self, session_id: str) -> Upstream:
        """Open one upstream stream; raises :class:`UpstreamError` when it cannot."""

    async def aclose(self) -> None:
        """Release shared resources (clients, connection pools)."""
