"""Webhook receivers that misbehave, shared by the integration and e2e tests of webhook delivery."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def hanging_receiver(bound_s: float = 120) -> Iterator[dict[str, Any]]:
    """Accepts connections and never answers. Counts this receiver's own attempts: ``max_open``, the most distinct
    events (``webhook-id``) whose attempts were open at once, and ``closed``, the attempts the client closed.

    An attempt is this receiver's once its request names ``seen["path"]`` (unique per receiver): the shared stack may
    still retry an earlier test's delivery whose receiver had the same ephemeral port, and such a stranger is closed
    at once, never counted. Events, not connections, are counted because an event may be delivered twice (SNS is
    at-least-once, and two finishers racing, a DELETE and the execution's RecordFailure, may both publish the job's
    one event, with one event id: docs/events.md): two CI runs counted 11 and 12 connections for 10 events.
    ``max_connections`` counts connections, duplicates included. It serves for at most ``bound_s``."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    listener.setblocking(False)
    path = f"/slow-{uuid.uuid4().hex}"
    seen: dict[str, Any] = {"port": listener.getsockname()[1], "path": path, "max_open": 0, "closed": 0}
    seen |= {"strangers": 0, "ids": [], "max_connections": 0}  # ids: each attempt's webhook-id, in arrival order
    stop = threading.Event()

    def serve() -> None:
        received: dict[socket.socket, bytes] = {}
        ours: dict[socket.socket, str] = {}  # an open attempt of ours -> its event id
        ends = time.monotonic() + bound_s
        while not stop.is_set() and time.monotonic() < ends:
            readable, _, _ = select.select([listener, *received], [], [], 0.05)
            for ready in readable:
                if ready is listener:
                    conn, _ = listener.accept()
                    received[conn] = b""
                    continue
                try:
                    data = ready.recv(65536)
                except OSError:
                    data = b""
                if data and ready not in ours:
                    received[ready] += data
                    if b"\r\n\r\n" not in received[ready]:
                        continue  # the request's head is still arriving
                    request, *headers = received[ready].split(b"\r\n\r\n", 1)[0].decode(errors="replace").split("\r\n")
                    if request.split(" ")[1:2] == [path]:
                        ids = [h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("webhook-id:")]
                        ours[ready] = ids[0] if ids else "?"
                        seen["ids"].append(ours[ready])
                        seen["max_open"] = max(seen["max_open"], len(set(ours.values())))
                        seen["max_connections"] = max(seen["max_connections"], len(ours))
                        continue
                    data = b""  # a stranger's request: closed unanswered, not counted
                    seen["strangers"] += 1
                if not data:
                    del received[ready]
                    ready.close()
                    if ours.pop(ready, None) is not None:
                        seen["closed"] += 1
        for conn in received:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(bound_s)
        listener.close()


@contextlib.contextmanager
def recording_receiver() -> Iterator[dict[str, Any]]:
    """Answers 204 to every POST to its own unique path (``seen["path"]``) and records each one: ``seen["posts"]``, a
    list of ``{"webhook_id", "job_id", "event_type"}`` in arrival order, recorded before the answer is sent. A request
    to another path (the shared stack still retrying an earlier test's delivery to a receiver that had the same
    ephemeral port) is answered 404 and only counted (``seen["strangers"]``). In-process: what it counts is what
    reached the socket, with no subprocess output in between."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    path = f"/recorded-{uuid.uuid4().hex}"
    seen: dict[str, Any] = {"path": path, "posts": [], "strangers": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != path:
                with lock:
                    seen["strangers"] += 1
                self._answer(404)
                return
            try:
                event = json.loads(body)
            except ValueError:
                event = {}
            with lock:
                seen["posts"].append({"webhook_id": self.headers.get("webhook-id"), "job_id": event.get("job_id"),
                                      "event_type": event.get("event_type")})  # fmt: skip
            self._answer(204)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen["port"] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
