"""Issue 33 item 5: no request hides inside another at the local front door (RFC 9112 sections 5 and 6).

Each case sends, on one raw TCP connection to the running stack's front door, a POST whose framing two HTTP parsers
could read differently, followed by a fully signed ``POST /jobs``. The door must answer the first with a 400 (501 for
a transfer coding it does not implement), close the connection, and never read the bytes after it as a request: the
signed POST hidden there starts no execution. The door used to take ``Transfer-Encoding: gzip`` as "no body" and run
the hidden POST, and to read two Transfer-Encoding headers as the first one.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.frontdoor import FrontDoorClient, executions

READ_TIMEOUT_S = 20.0  # the door's own idle timeout is 30 s: a connection still open after 20 s was kept alive


def _hidden_post(door: FrontDoorClient, host: str) -> bytes:
    """A complete, validly signed POST /jobs (a job the attacker could not otherwise get past a front-end)."""
    body = json.dumps({"prompt": f"a smuggled fox {uuid.uuid4().hex}"}).encode()
    headers = door.signed("POST", "/jobs", body, [("Content-Type", "application/json")])
    lines = ["POST /jobs HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers if k.lower() != "host")]
    return ("\r\n".join([*lines, f"Content-Length: {len(body)}"]) + "\r\n\r\n").encode() + body


def _exchange(door: FrontDoorClient, raw: bytes) -> tuple[list[int], bool]:
    """Send ``raw`` on one connection; the statuses of every response read back, and whether the door closed it."""
    where = urlsplit(door.api_url)
    received = b""
    closed = False
    with socket.create_connection((where.hostname, where.port), timeout=READ_TIMEOUT_S) as sock:
        sock.sendall(raw)
        try:
            while chunk := sock.recv(65536):
                received += chunk
            closed = True
        except TimeoutError:
            closed = False
        except ConnectionResetError:
            closed = True  # the door closed with unread bytes still queued: also a close
    statuses = _statuses(received)
    return statuses, closed


def _statuses(received: bytes) -> list[int]:
    """The status of every response in ``received`` (a body does not end with CRLF: the next status line may follow
    it on the same line)."""
    return [int(found) for found in re.findall(rb"HTTP/1\.[01] (\d{3}) ", received)]


def _chunked(body: bytes, size_line: bytes | None = None) -> bytes:
    return (size_line or f"{len(body):x}".encode()) + b"\r\n" + body + b"\r\n0\r\n\r\n"


OUTER = b'{"prompt": "the outer request"}'

# (framing headers of the outer POST, its body bytes, the status the door answers). Every body is followed on the
# wire by the hidden signed POST.
CASES: dict[str, tuple[list[str], bytes, int]] = {
    # The reported attack: a coding the door does not implement, no Content-Length: the old door read "no body".
    "Transfer-Encoding: gzip, no Content-Length": (["Transfer-Encoding: gzip"], b"", 400),
    # Two Transfer-Encoding headers: the old door read the first; a front-end reading the last sees no chunked body.
    "two Transfer-Encoding headers, chunked then gzip": (
        ["Transfer-Encoding: chunked", "Transfer-Encoding: gzip"], _chunked(OUTER), 400),
    "chunked applied twice": (["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"], _chunked(OUTER), 400),
    "gzip before a final chunked": (["Transfer-Encoding: gzip, chunked"], _chunked(OUTER), 501),
    "an empty transfer coding": (["Transfer-Encoding: , chunked"], _chunked(OUTER), 400),
    "Transfer-Encoding and Content-Length": (
        ["Transfer-Encoding: chunked", f"Content-Length: {len(_chunked(OUTER))}"], _chunked(OUTER), 400),
    # "Transfer-Encoding : chunked" is not a field line: the old parse stopped there and lost the headers after it.
    "whitespace before the colon": (["Transfer-Encoding : chunked", "X-After: lost"], _chunked(OUTER), 400),
    "obs-fold": (["Content-Length: 0", "X-Folded: a", " b"], b"", 400),
    "a chunk size that is not hex digits": (["Transfer-Encoding: chunked"], _chunked(OUTER, b"0x1f"), 400),
    "differing Content-Lengths": ([f"Content-Length: {len(OUTER)}", "Content-Length: 0"], OUTER, 400),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_request_the_door_cannot_frame_is_refused_and_nothing_after_it_runs(
    door: FrontDoorClient, door_state: dict[str, Any], case: str
) -> None:
    framing, outer_body, status = CASES[case]
    host = urlsplit(door.api_url).netloc
    head = "\r\n".join(["POST /jobs HTTP/1.1", f"Host: {host}", "Content-Type: application/json", *framing])
    before = len(executions(door_state))

    statuses, closed = _exchange(door, head.encode() + b"\r\n\r\n" + outer_body + _hidden_post(door, host))

    assert statuses == [status], f"{case}: one answer, the refusal (got {statuses})"
    assert closed, f"{case}: the door must close the connection after a request it could not frame"
    assert len(executions(door_state)) == before, f"{case}: the hidden signed POST started a job"


def test_transfer_encoding_in_http_1_0_is_refused(door: FrontDoorClient, door_state: dict[str, Any]) -> None:
    """RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing."""
    host = urlsplit(door.api_url).netloc
    head = f"POST /jobs HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"
    statuses, closed = _exchange(door, head.encode() + b"\r\n\r\n" + _chunked(OUTER))
    assert (statuses, closed) == ([400], True)


def test_a_well_framed_pipelined_pair_is_still_served_in_order(door: FrontDoorClient) -> None:
    """The other side: two well-framed requests on one kept-alive connection are both answered (the first is
    refused by the function for its empty prompt, the second -- signed -- is accepted)."""
    host = urlsplit(door.api_url).netloc
    first = f"GET /jobs/not-a-job HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n".encode()
    where = urlsplit(door.api_url)
    with socket.create_connection((where.hostname, where.port), timeout=READ_TIMEOUT_S) as sock:
        sock.sendall(first + _hidden_post(door, host).replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1))
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    statuses = _statuses(received)
    assert statuses == [403, 202], received[:500]
