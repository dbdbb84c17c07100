"""Has the WebSocket client gone? Answered without reading from the socket.

uvicorn pauses reading a WebSocket after each message until the app asks for the next one, and vLLM-Omni (which the
emulator imitates) does not read while it synthesises an utterance. So a client that leaves mid-utterance is only
noticed when a send fails, and synthesis done meanwhile is wasted: after 200 abandoned utterances a 12-character one
waited 52 s behind their synthesis (issue 10, item 5). The emulator keeps not reading (relay tests depend on that
behaviour, see tests/integration/relay/test_relay_long_utterances.py) but asks the kernel instead: a peeked
``recv(MSG_PEEK | MSG_DONTWAIT)`` on the connection's socket reports a reset (``ECONNRESET``) or an end of stream
without consuming anything. A client that closes politely is seen once its TCP connection is gone (the relay aborts
the upstream connection 2 s after its close frame; a write to a closed socket gets a reset too).
"""

from __future__ import annotations

import os
import socket
from typing import Any

SERVER_SEND_SCOPE_KEY = "omnireel.server_send"  # set by app._with_server_send, outside every middleware


class PeerWatch:
    def __init__(self, websocket: Any) -> None:
        # uvicorn's ASGI send is a method of its protocol object, which holds the connection's transport.
        server_send = getattr(websocket, "scope", {}).get(SERVER_SEND_SCOPE_KEY)
        self._protocol = getattr(server_send, "__self__", None)
        transport = getattr(self._protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        self._fd = sock.fileno() if sock is not None else -1

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def gone(self) -> bool:
        """True when the client reset or ended the connection; False while it is there (or cannot be told)."""
        if getattr(self._protocol, "disconnected", False):
            return True
        if self._fd < 0:
            return False
        try:
            probe = socket.socket(fileno=os.dup(self._fd))
        except OSError:
            return True  # the descriptor is already closed
        try:
            data = probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False  # nothing unread: connected and quiet
        except OSError:
            return True  # ECONNRESET, EPIPE...
        finally:
            probe.close()  # closes the duplicate only; the connection itself is untouched
        return data == b""  # end of stream; unread data means the client is still talking
