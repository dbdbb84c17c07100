"""The tests' plain-HTTP calls to the processes they start on loopback (emulators, the local stack's services).

``httpx.get(...)`` builds a client for each call, and a client builds a TLS context with the CA bundle even for an
``http://`` URL (~10 ms of CPU each, a measurable share of a worker's time in ``make test``). ``http()`` is one client
per thread instead (an ``httpx.Client`` with httpx's defaults, as the module functions use: 5 s timeouts, no
redirects), kept for the thread's life; a connection its server closed is dropped by the pool and opened again."""

from __future__ import annotations

import threading

import httpx

_local = threading.local()


def http() -> httpx.Client:
    """This thread's client."""
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = httpx.Client()
    return client
