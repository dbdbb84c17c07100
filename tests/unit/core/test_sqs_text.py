"""Issue 33 item 6: a batch line holding characters SQS refuses in a message body (U+FFFE, U+FFFF, a lone surrogate)
travels JSON-escaped: the queue message is within SQS's set, parses back to the same line, and is sized as SQS counts
it (the escaped form)."""

from __future__ import annotations

import json

import pytest

from omnireel.aws.batch_queue import lines_messages
from omnireel.batches.batch import Line
from omnireel.core.sqs_text import compact_json, sqs_safe_json, utf8_size
from omnireel_local.patches.sqs_sns import sqs_disallowed_character

REFUSED_BY_SQS = ["\ufffe", "\uffff", "\ud800", "\udfff"]


@pytest.mark.parametrize("character", REFUSED_BY_SQS, ids=[f"U+{ord(c):04X}" for c in REFUSED_BY_SQS])
def test_a_line_with_a_character_sqs_refuses_travels_escaped_and_unchanged(character: str) -> None:
    line = Line(7, json.dumps({"prompt": f"a lantern {character} at dusk"}, ensure_ascii=False))
    [body] = lines_messages({"kind": "lines", "batch_id": "b"}, [line])
    assert sqs_disallowed_character(body) is None, "the body SQS receives is within its set"
    assert f"\\u{ord(character):04x}" in body
    assert Line.from_message(json.loads(body)["lines"][0]) == line, "lossless"


def test_the_escaped_form_is_what_is_measured() -> None:
    text = compact_json({"prompt": "\ufffe" * 1000})
    assert utf8_size(text) == len('{"prompt":""}') + 6 * 1000  # 6 bytes each, not the 3 of raw UTF-8


def test_every_character_in_sqs_set_is_left_as_is() -> None:
    text = json.dumps({"p": "é 漢 \U0001f600 \ufffd \ud7ff \ue000 \t"}, ensure_ascii=False)
    assert sqs_safe_json(text) == text
