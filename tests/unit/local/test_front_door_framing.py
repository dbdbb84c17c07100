"""Issue 33 item 5: the front door's body framing (``api_gateway.framing``) follows RFC 9112 -- the pure part, over
headers as http.server parses them. tests/integration/frontdoor/test_request_smuggling.py sends the same shapes on
the wire with a signed request hidden behind each."""

from __future__ import annotations

import io
from http.client import parse_headers

import pytest

from omnireel_local.api_gateway import BadRequest, framing


def _framing(raw: str, version: str = "HTTP/1.1") -> int | None:
    return framing(parse_headers(io.BytesIO(raw.encode("latin-1") + b"\r\n")), version)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ("Host: x\r\n", 0),
        ("Content-Length: 12\r\n", 12),
        ("Content-Length: 12, 12\r\n", 12),  # RFC 9110 8.6: identical values may be taken as one
        ("Content-Length: 12\r\nContent-Length: 12\r\n", 12),
        ("Transfer-Encoding: chunked\r\n", None),
        ("Transfer-Encoding: Chunked \r\n", None),
    ],
)
def test_well_framed_requests_are_read(headers: str, expected: int | None) -> None:
    assert _framing(headers) == expected


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ("Transfer-Encoding: gzip\r\n", 400),
        ("Transfer-Encoding: identity\r\n", 400),
        ("Transfer-Encoding: chunked, gzip\r\n", 400),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", 400),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400),
        ("Transfer-Encoding: ,chunked\r\n", 400),
        ("Transfer-Encoding: gzip, chunked\r\n", 501),
        ("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 501),
        ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400),
        ("Content-Length: 5\r\nContent-Length: 6\r\n", 400),
        ("Content-Length: 5, 6\r\n", 400),
        ("Content-Length: +5\r\n", 400),
        ("Content-Length: 0x5\r\n", 400),
        ("Transfer-Encoding : chunked\r\nContent-Length: 5\r\n", 400),  # whitespace before the colon
        ("Host: x\r\nnot a field line\r\nContent-Length: 5\r\n", 400),
        (" Host: x\r\n", 400),  # the first line a continuation
        ("X-Note: a\r\n b\r\n", 400),  # obs-fold
        ("X-Note: a\x00b\r\n", 400),
    ],
)
def test_framing_two_parsers_could_read_differently_is_refused(headers: str, status: int) -> None:
    with pytest.raises(BadRequest) as refused:
        _framing(headers)
    assert refused.value.status == status


def test_transfer_encoding_in_http_1_0_is_refused() -> None:
    with pytest.raises(BadRequest):
        _framing("Transfer-Encoding: chunked\r\n", "HTTP/1.0")
