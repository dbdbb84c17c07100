"""A scripted API on loopback for the client's tests: it answers what the test says, polite or hostile (a redirect, an
HTML page, a status line that is not HTTP, a body cut short), and records every request it received."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.credentials import Credentials

CREDENTIALS = Credentials("AKIDEXAMPLE", "secret")
ACCEPTED = {"job_id": "00000000-0000-4000-8000-000000000001", "status": "accepted", "status_url": "/jobs/x"}


@dataclass(frozen=True)
class Raw:
    """Bytes written to the socket as they are (no status line or headers of the server's own), then a close."""

    data: bytes


@dataclass
class Script:
    """Answers in order: (status, body, headers, delay_s) or ``Raw``; the last one repeats. A ``bytes`` body is sent
    as it is, anything else as JSON."""

    answers: list[tuple[int, Any, dict[str, str], float] | Raw] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def serve(script: Script, tls: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    """Serve ``script`` on a loopback port (over TLS with ``tls``, a server context); ``script.url`` says where."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                                "body": body})  # fmt: skip
            answer = script.answers[min(len(script.seen), len(script.answers)) - 1]
            try:
                if isinstance(answer, Raw):
                    self.wfile.write(answer.data)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                status, payload, headers, delay = answer
                time.sleep(delay)  # a slow peer (the client's timeout is what is tested)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    script.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _scripted() -> Iterator[tuple[str, Script]]:
    script = Script()
    server = serve(script)
    try:
        yield script.url, script
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def api() -> Iterator[tuple[str, Script]]:
    """The API the client is pointed at: its URL and its script."""
    yield from _scripted()


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, Script]]:
    """Another server on another loopback port (where a hostile answer points the client)."""
    yield from _scripted()
