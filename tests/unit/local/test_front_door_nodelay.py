"""The local front door answers without Nagle's delay (issue 11 item 3).

Its handler writes the status line and headers, then the body: two small segments. With Nagle's algorithm on, the
body waits for the client's ACK of the headers, and a client that delays its ACK (Linux: up to 40 ms) stalled every
answer on a kept-alive connection: GET /jobs/{id} took ~64 ms through the door for a 9 ms Lambda. API Gateway has no
such stall, so the door's accepted connections set TCP_NODELAY. Checked on the accepted socket itself, not by timing.
"""

from __future__ import annotations

import http.client
import socket
from typing import Any

from omnireel_local.api_gateway import FrontDoor


def test_every_accepted_connection_has_tcp_nodelay() -> None:
    door = FrontDoor([], "http://127.0.0.1:9", "us-east-1", "123456789012")
    server = door.serve("127.0.0.1", 0)
    seen: list[int] = []
    handler = server.RequestHandlerClass
    original_setup = handler.setup

    def setup(self: Any) -> None:
        original_setup(self)
        seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    handler.setup = setup  # type: ignore[method-assign]
    try:
        for _ in range(2):
            connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
            connection.request("GET", "/no-such-route")
            response = connection.getresponse()
            assert response.status == 404 and response.read() == b'{"message": "Not Found"}'
            connection.close()
    finally:
        door.shutdown()
    assert seen and all(seen), f"TCP_NODELAY on accepted connections: {seen}"
