"""The stack server's header parsing fast path (local/omnireel_local/http_headers.py) returns exactly what the standard
library's email-based parser returns, for plain blocks and for the odd and hostile ones it hands back."""

from __future__ import annotations

import http.client
import io
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from omnireel_local import http_headers

ORIGINAL = http_headers._ORIGINAL or http.client._parse_header_lines

BLOCKS = [
    # plain: what botocore, httpx and browsers send
    b"Host: 127.0.0.1:4710\r\nX-Amz-Target: DynamoDB_20120810.GetItem\r\nContent-Length: 52\r\n\r\n",
    b"Host: a\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKIA/20261206/us-east-1/dynamodb/aws4_request, "
    b"SignedHeaders=host;x-amz-date, Signature=abc\r\nX-Amz-Date: 20261206T010203Z\r\n\r\n",
    b"Host: a\nAccept: */*\n\n",  # LF line ends
    b"Host: a\r\nX-Empty:\r\nX-Spaces:    \r\nX-Tab:\tv\t\r\n\r\n",
    b"Host: a\r\nX-Dup: 1\r\nx-dup: 2\r\nX-DUP: 3\r\n\r\n",
    b"Host: a\r\nX-Colons: a:b:c\r\nX-Latin: caf\xe9\r\n\r\n",
    b"Content-Type: application/x-amz-json-1.0\r\n\r\n",
    b"Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n\r\n",
    b"\r\n",  # no headers at all
    # handed back to the email parser
    b"Content-Type: multipart/form-data; boundary=xyz\r\n\r\n",
    b"Content-Type: message/rfc822\r\n\r\n",
    b"Content-Type: MULTIPART/mixed\r\n\r\n",
    b"Host: a\r\n folded continuation\r\n\r\n",
    b"Host: a\r\n\tfolded with a tab\r\n\r\n",
    b"Host: a\r\nno colon here\r\nX-After: 1\r\n\r\n",
    b"Host: a\r\n: empty name\r\n\r\n",
    b"Host: a\r\nBad Name: space in the name\r\n\r\n",
    b"From nobody Mon Jan  1 00:00:00 2026\r\nHost: a\r\n\r\n",
    b"Host: a\rX-Smuggled: 1\r\n\r\n",  # a lone CR inside a line
    b"Host: a\r\r\n\r\n",
    b"Host: a\r\nX-Ctl\x01: 1\r\n\r\n",
    b"Host: a\r\nX-Del\x7f: 1\r\n\r\n",
    b"Host: a\r\nX-High\xff: 1\r\n\r\n",
    b"Host: a\r\n",  # EOF before the blank line
    b"",
]


def _lines(block: bytes) -> list[bytes]:
    return http.client._read_headers(io.BytesIO(block))


def _state(message: object) -> dict[str, object]:
    """Every attribute of the message; defects by kind, nested messages (``message/*`` bodies) by their own state."""
    state = dict(vars(message))
    state["defects"] = [type(d).__name__ for d in state.get("defects", [])]
    if isinstance(state.get("_payload"), list):
        state["_payload"] = [_state(part) for part in state["_payload"]]
    return state


@pytest.mark.parametrize("block", BLOCKS, ids=range(len(BLOCKS)))
def test_the_fast_path_returns_what_the_email_parser_returns(block: bytes) -> None:
    expected = ORIGINAL(_lines(block), http.client.HTTPMessage)
    got = http_headers.parse_header_lines(_lines(block), http.client.HTTPMessage)
    assert type(got) is type(expected)
    assert _state(got) == _state(expected)
    assert got.items() == expected.items()
    assert got.get_all("x-dup") == expected.get_all("x-dup")
    assert got.as_string() == expected.as_string()


def test_a_plain_block_does_not_reach_the_email_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(http_headers, "_ORIGINAL", lambda lines, cls: calls.append(lines))
    http_headers.parse_header_lines(_lines(BLOCKS[0]), http.client.HTTPMessage)
    assert calls == []
    http_headers.parse_header_lines(_lines(b"Host: a\r\n folded\r\n\r\n"), http.client.HTTPMessage)
    assert len(calls) == 1


def test_an_http_server_behind_the_installed_parser_reads_the_same_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed (as the stack server does), http.server hands a handler the headers a client sent, repeats kept."""
    monkeypatch.setattr(http.client, "_parse_header_lines", ORIGINAL)
    monkeypatch.setattr(http_headers, "_ORIGINAL", None)
    assert http_headers.install()
    assert http.client._parse_header_lines is http_headers.parse_header_lines
    seen: list[list[tuple[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.items())
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
        conn.putrequest("GET", "/", skip_accept_encoding=True)
        conn.putheader("X-Dup", "1")
        conn.putheader("X-Dup", "2")
        conn.endheaders()
        assert conn.getresponse().status == 204
        conn.close()
    finally:
        thread.join(10)
        server.server_close()
    assert [(k, v) for k, v in seen[0] if k.startswith("X-")] == [("X-Dup", "1"), ("X-Dup", "2")]
