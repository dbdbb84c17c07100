"""SQS message text: the characters SQS allows in a body, JSON made to fit them losslessly, and sizes as SQS counts
them.

SQS accepts only ``#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF`` in a message body (SendMessage's
MessageBody reference) and refuses any other character with ``InvalidMessageContents`` -- in SendMessageBatch as that
entry's failure. A job request may hold such a character (a raw U+FFFE in a prompt is valid UTF-8 and valid JSON), and
the queue messages that carry batch lines are JSON written with ``ensure_ascii=False``, so it would reach SQS raw.

JSON may spell any character as a ``\\uXXXX`` escape, so ``sqs_safe_json`` escapes exactly the characters outside the
set: the text parses to the same value (lossless) and SQS accepts it. ``json.dumps`` already escapes the C0 controls,
so in its output these can only be U+FFFE, U+FFFF and lone surrogates, all inside strings. The escaped form is what
SQS counts: a U+FFFE takes 6 bytes in the message, not its 3 raw UTF-8 bytes.

A message is at most ``MAX_MESSAGE_BYTES`` as SQS counts it: the UTF-8 bytes of the body (no message attributes are
sent). 262,144 bytes is the default MaximumMessageSize of an SQS queue (CreateQueue's attribute reference; the batch
queue does not raise it), and one SendMessageBatch carries at most 10 entries whose sizes add up to at most 1,048,576
bytes (1 MiB, the SendMessageBatch reference). The local SQS enforces all three (omnireel_local/patches/sqs_sns.py,
patch 29).
"""

from __future__ import annotations

import json
import re

MAX_MESSAGE_BYTES = 262_144
MAX_BATCH_CALL_BYTES = 1_048_576
MAX_BATCH_CALL_ENTRIES = 10

_OUTSIDE_SQS_SET = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sqs_safe_json(text: str) -> str:
    """``text`` (JSON, as ``json.dumps`` writes it) with every character SQS refuses replaced by its JSON escape."""
    return _OUTSIDE_SQS_SET.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def compact_json(value: object) -> str:
    """JSON for a queue message: UTF-8 text as is (``ensure_ascii=False``: a 4-byte character costs 4 bytes, not the
    12 of its ASCII escape), compact separators. Text with a lone surrogate (JSON ``"\\ud800"`` in a POST /batches
    job) cannot be UTF-8 and is sent ASCII-escaped instead: the line still reaches validation, which refuses it.
    Characters SQS refuses in a body (U+FFFE, U+FFFF, lone surrogates) are JSON-escaped (``sqs_safe_json``): lossless,
    and the sizes measured from this text are the escaped ones SQS counts."""
    text = sqs_safe_json(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"))
    return text


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def send_groups(bodies: list[str]) -> list[list[str]]:
    """Bodies grouped into SendMessageBatch calls: at most ``MAX_BATCH_CALL_ENTRIES`` each, whose UTF-8 sizes add up
    to at most ``MAX_BATCH_CALL_BYTES``."""
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for body in bodies:
        cost = utf8_size(body)
        if cost > MAX_MESSAGE_BYTES:
            raise ValueError(f"a queue message of {cost} bytes is over {MAX_MESSAGE_BYTES}")
        if current and (len(current) >= MAX_BATCH_CALL_ENTRIES or size + cost > MAX_BATCH_CALL_BYTES):
            groups.append(current)
            current, size = [], 0
        current.append(body)
        size += cost
    if current:
        groups.append(current)
    return groups
