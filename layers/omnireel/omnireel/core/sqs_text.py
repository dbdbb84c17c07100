"""The characters SQS allows in a message body, and JSON text made to fit them losslessly.

SQS accepts only ``#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF`` in a message body (SendMessage's
MessageBody reference) and refuses any other character with ``InvalidMessageContents`` -- in SendMessageBatch as that
entry's failure. A job request may hold such a character (a raw U+FFFE in a prompt is valid UTF-8 and valid JSON), and
the queue messages that carry batch lines are JSON written with ``ensure_ascii=False``, so it would reach SQS raw.

JSON may spell any character as a ``\\uXXXX`` escape, so ``sqs_safe_json`` escapes exactly the characters outside the
set: the text parses to the same value (lossless) and SQS accepts it. ``json.dumps`` already escapes the C0 controls,
so in its output these can only be U+FFFE, U+FFFF and lone surrogates, all inside strings. The escaped form is what
SQS counts: a U+FFFE takes 6 bytes in the message, not its 3 raw UTF-8 bytes.
"""

from __future__ import annotations

import re

_OUTSIDE_SQS_SET = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sqs_safe_json(text: str) -> str:
    """``text`` (JSON, as ``json.dumps`` writes it) with every character SQS refuses replaced by its JSON escape."""
    return _OUTSIDE_SQS_SET.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
