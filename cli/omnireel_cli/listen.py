"""``--listen HOST:PORT`` for the CLI's loopback servers (``omnireel ui``, ``omnireel tts-proxy``): loopback only,
because whatever reaches them acts with your identity or token."""

from __future__ import annotations

import ipaddress

from .errors import UsageError


def parse_loopback(value: str, why: str) -> tuple[str, int]:
    """(host, port) of ``value``; a ``UsageError`` for anything but a loopback address (``why`` says why not)."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        number = int(port)
    except ValueError:
        raise UsageError(f"--listen must be HOST:PORT on loopback, got {value!r}") from None
    if not loopback:
        raise UsageError(f"--listen {value}: {why}: loopback only")
    if not 0 <= number <= 65535:
        raise UsageError(f"--listen {value}: port out of range")
    return host, number
