"""``home.free_port``: the port it returns stays out of the kernel's hands until our server binds it.

CI at e4a9e34 (stop 42) failed because a stack's API front door found its ephemeral port taken ("Address already in
use"): the port had been chosen by binding port 0 and closing, six seconds before the front door bound it, and in
between another worker's stack was handed the same port by its own ``bind(0)``. These tests pin the two properties
that close that window. They need nothing but loopback sockets, and they fail on the old bind-and-close version.
"""

from __future__ import annotations

import errno
import socket

import pytest

from omnireel_local import home as homedir


def test_another_bind_without_reuse_is_refused_so_no_bind_zero_can_be_handed_the_port() -> None:
    """The kernel's ``bind(0)`` skips a port it would refuse to an explicit bind; a merely closed port it would not."""
    port = homedir.free_port()
    with socket.socket() as other, pytest.raises(OSError) as refused:
        other.bind(("127.0.0.1", port))
    assert refused.value.errno == errno.EADDRINUSE


def test_bind_zero_never_returns_a_reserved_port() -> None:
    """What a parallel stack does: many ``bind(0)`` calls, none of which may land on a port we reserved."""
    reserved = {homedir.free_port() for _ in range(20)}
    handed_out = set()
    for _ in range(2000):
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            handed_out.add(other.getsockname()[1])
    assert not reserved & handed_out


@pytest.mark.parametrize("listen_twice", [False, True], ids=["first-server", "restarted-server"])
def test_a_server_that_sets_reuse_address_binds_and_serves_the_reserved_port(listen_twice: bool) -> None:
    """Every server of the stack sets SO_REUSEADDR (http.server, werkzeug, uvicorn, asyncio); it gets the port, and
    so does a restarted one (the supervisor restarts a dead emulator on the same port)."""
    port = homedir.free_port()
    for _ in range(2 if listen_twice else 1):
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen(1)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
                accepted, _ = server.accept()
                with accepted:
                    client.sendall(b"ping")
                    assert accepted.recv(4) == b"ping"


def test_nothing_listens_on_a_reserved_port_so_a_connection_is_refused() -> None:
    """Tests use a fresh free port as "a closed port" (a dead webhook receiver, a relay that is down)."""
    port = homedir.free_port()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
