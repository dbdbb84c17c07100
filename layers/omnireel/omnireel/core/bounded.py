"""Bounding text that echoes caller input: error messages, reasons, tags and events never grow with the input.

Pure: no AWS here. A 100 KB field name must not become a 100 KB error message (or a 7 MB one a 500 because the
response is too large): every echoed value is cut to a few dozen characters and every whole message to
``MAX_MESSAGE_CHARS``, with a marker saying how much was left out.
"""

from __future__ import annotations

MAX_MESSAGE_CHARS = 1024  # a whole error message, failure reason or event error
MAX_ECHO_CHARS = 64  # one echoed value (a field name, a file name) inside a message


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and ``…(+N chars)``, ``limit`` chars in all."""
    if len(text) <= limit:
        return text
    for digits in range(1, 12):  # the marker's length depends on N, which depends on the marker's length
        cut = limit - len(f"…(+{'9' * digits} chars)")
        if len(str(len(text) - cut)) <= digits:
            return text[: max(cut, 0)] + f"…(+{len(text) - cut} chars)"
    return text[:limit]  # unreachable for any real string
