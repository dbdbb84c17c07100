"""A fast path for the standard library's HTTP header parsing, installed in the local stack's server process only.

``http.server`` (the local AWS's endpoint, the front door) and ``http.client`` (urllib3, so botocore, in the same
process) read a message's header block with ``http.client._parse_header_lines``, which runs it through the ``email``
package's feed parser: ~0.1 ms per request, ~7 % of the local AWS's CPU per call in a profile (py-spy, GetItem loop).

``parse_header_lines`` builds the same ``HTTPMessage`` directly when the block is plain -- every line ``Name: value``
with a token name and a CRLF or LF end, no folded line, no stray CR, no body type the email parser would look into
(``multipart/*``, ``message/*``) -- and hands anything else to the original parser, so every message it returns is one
the original would have returned: ``tests/unit/local/test_http_headers.py`` compares the two objects attribute by
attribute over plain, odd and hostile blocks. Nothing outside the stack's server process is patched.
"""

from __future__ import annotations

import email.message
import http.client
from collections.abc import Callable
from email import policy as email_policy
from typing import Any

# The characters the email parser accepts in a header name (``email.feedparser.headerRE``: 0x21-0x7E but ':').
_NAME_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F)) - {":"}
_ORIGINAL: Callable[..., Any] | None = None


def parse_header_lines(header_lines: list[bytes], _class: type = http.client.HTTPMessage) -> Any:
    """``http.client._parse_header_lines``: the same message, built without the email parser when the block is plain."""
    original = _ORIGINAL or http.client._parse_header_lines
    if not (isinstance(_class, type) and issubclass(_class, email.message.Message)):
        return original(header_lines, _class)
    if not header_lines or header_lines[-1] not in (b"\r\n", b"\n"):
        return original(header_lines, _class)  # no blank line ends the block (EOF): the email parser decides
    headers: list[tuple[str, str]] = []
    for raw in header_lines[:-1]:
        line = raw.decode("iso-8859-1")
        end = 2 if line.endswith("\r\n") else 1 if line.endswith("\n") else 0
        text = line[:-end] if end else line
        colon = text.find(":")
        if not end or colon <= 0 or "\r" in text or "\n" in text or not _NAME_CHARS.issuperset(text[:colon]):
            return original(header_lines, _class)  # folded, nameless, odd or hostile: the email parser's reading
        name, value = text[:colon], text[colon + 1 :].lstrip(" \t")
        if name.lower() == "content-type" and ("multipart" in value.lower() or "message" in value.lower()):
            return original(header_lines, _class)  # the email parser looks into these bodies
        headers.append((name, value))  # the email parser's value: stripped before, and no CR or LF is left in it
    message = _class(policy=email_policy.compat32)
    message._headers = headers
    message._payload = ""  # what the parser leaves after a header-only block
    return message


def install() -> bool:
    """Use ``parse_header_lines`` in this process (once); False if this Python's ``http.client`` lacks the hook."""
    global _ORIGINAL
    current = getattr(http.client, "_parse_header_lines", None)
    if current is None:
        return False
    if current is not parse_header_lines:
        _ORIGINAL = current
        http.client._parse_header_lines = parse_header_lines
    return True
