"""Batches: many job requests in one submission (a ``prompts/*.jsonl`` drop or ``POST /batches``).

Each line becomes one normal job through the same validation (``request.parse_job_request_json``) and submission
(``submission.submit_job``) as a single job; a bad line becomes one failed job whose reason names its line. A line's
job id derives from the batch's natural key and the line number, so the same object version (or the same
``Idempotency-Key``) never makes a line's job twice, however often the fan-out is retried.

This module is the pure part: limits, identities, splitting bytes into numbered lines and lines into queue chunks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from omnireel.core.errors import InvalidRequest
from omnireel.core.sqs_text import sqs_safe_json
from omnireel.jobs.job import job_id_for

MAX_LINES = 10_000
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_API_JOBS = 1_000
MAX_LINE_BYTES = 64 * 1024  # the same bound as a single dropped file (inbox.MAX_FILE_BYTES)
# A queue message carries at most this many lines (bounded work per BatchSubmit record) and is at most
# ``MAX_MESSAGE_BYTES`` as SQS counts it: the UTF-8 bytes of the body (no message attributes are sent). 262,144 bytes
# is the default MaximumMessageSize of an SQS queue (CreateQueue's attribute reference; the batch queue does not raise
# it), and one SendMessageBatch carries at most 10 entries whose sizes add up to at most 1,048,576 bytes (1 MiB, the
# SendMessageBatch reference). The local SQS enforces all three (omnireel_local/patches/sqs_sns.py, patch 29).
CHUNK_LINES = 25
MAX_MESSAGE_BYTES = 262_144
MAX_BATCH_CALL_BYTES = 1_048_576
MAX_BATCH_CALL_ENTRIES = 10
# The splitter reads the file in steps of this many bytes and checkpoints after each (a 10 MB file: <= 10 steps).
SPLIT_STEP_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Line:
    """One non-blank line: its 1-based number in the file, its text, or why it cannot be read."""

    number: int
    text: str | None
    error: str | None = None

    def as_message(self) -> dict[str, object]:
        return {"n": self.number, "text": self.text, "error": self.error}

    @classmethod
    def from_message(cls, data: dict[str, object]) -> Line:
        return cls(number=int(data["n"]), text=data.get("text"), error=data.get("error"))  # type: ignore[arg-type, call-overload]


def batch_id_for(natural_key: str) -> str:
    return job_id_for(f"batch:{natural_key}")


def line_natural_key(batch_natural_key: str, line: int) -> str:
    """The natural key of one line's job: the batch's (object version or caller + Idempotency-Key) and the line."""
    return f"{batch_natural_key}#line={line}"


def _line(number: int, raw: bytes) -> Line | None:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")
    if not raw.strip():
        return None  # blank lines are ignored (but keep their numbers: line numbers are the file's)
    if len(raw) > MAX_LINE_BYTES:
        return Line(number, None, f"the line is larger than {MAX_LINE_BYTES} bytes ({len(raw)})")
    try:
        return Line(number, raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Line(number, None, f"the line is not UTF-8 text (byte {exc.start})")


def split_lines(data: bytes, first_line: int, *, final: bool) -> tuple[list[Line], int, int]:
    """The complete lines of ``data`` (a window of the file starting at line ``first_line``).

    Returns (non-blank lines, bytes consumed, lines consumed). Without ``final`` the trailing partial line is left
    for the next window; with it the rest of the file is the last line.
    """
    lines: list[Line] = []
    consumed = 0
    number = first_line
    while consumed < len(data):
        end = data.find(b"\n", consumed)
        if end < 0:
            if not final:
                break
            end = len(data)
        number += 1
        line = _line(number, data[consumed:end])
        if line is not None:
            lines.append(line)
        consumed = min(end + 1, len(data))
    return lines, consumed, number - first_line


def count_lines(data: bytes) -> int:
    """Non-blank lines of a whole file: exactly the lines the splitter will emit (the batch completes when this many
    jobs are terminal), so it is computed by the splitter's own code."""
    return len(split_lines(data, 0, final=True)[0])


def check_file(data: bytes) -> int:
    """The number of job lines of a dropped ``.jsonl`` file, or ``InvalidRequest`` for a file that is not a batch."""
    if len(data) > MAX_FILE_BYTES:
        raise InvalidRequest(f"the batch file is larger than {MAX_FILE_BYTES} bytes")
    total = count_lines(data)
    if total == 0:
        raise InvalidRequest("the batch file has no job lines (one JSON job request per line)")
    if total > MAX_LINES:
        raise InvalidRequest(f"the batch file has {total} job lines; at most {MAX_LINES} are allowed")
    return total


def compact_json(value: object) -> str:
    """JSON for a queue message: UTF-8 text as is (``ensure_ascii=False``: a 4-byte character costs 4 bytes, not the
    12 of its ASCII escape), compact separators. Text with a lone surrogate (JSON ``"\\ud800"`` in a POST /batches
    job) cannot be UTF-8 and is sent ASCII-escaped instead: the line still reaches validation, which refuses it.
    Characters SQS refuses in a body (U+FFFE, U+FFFF, lone surrogates) are JSON-escaped (``core.sqs_text``): lossless,
    and the sizes measured from this text are the escaped ones SQS counts."""
    text = sqs_safe_json(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"))
    return text


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def lines_messages(envelope: dict[str, object], lines: list[Line]) -> list[str]:
    """Queue message bodies for ``lines``: ``envelope`` plus a ``lines`` array, each body at most ``CHUNK_LINES``
    lines and ``MAX_MESSAGE_BYTES`` of UTF-8 (measured, not estimated). A line that cannot fit even alone (only a line
    that is not JSON can: raw control characters take 6 bytes escaped) travels as an error line naming its size, so it
    becomes a failed job with that reason instead of a message SQS refuses."""
    head = compact_json({**envelope, "lines": []})
    assert head.endswith("[]}")
    prefix, suffix = head[:-2], "]}"
    fixed = utf8_size(prefix) + utf8_size(suffix)
    bodies: list[str] = []
    current: list[str] = []
    size = fixed
    for line in lines:
        encoded = compact_json(line.as_message())
        cost = utf8_size(encoded)
        if fixed + cost > MAX_MESSAGE_BYTES:
            oversized = Line(line.number, None, f"the line takes {cost} bytes as a queue message (at most "
                             f"{MAX_MESSAGE_BYTES - fixed} fit)")  # fmt: skip
            encoded = compact_json(oversized.as_message())
            cost = utf8_size(encoded)
        separator = 1 if current else 0
        if current and (len(current) >= CHUNK_LINES or size + separator + cost > MAX_MESSAGE_BYTES):
            bodies.append(prefix + ",".join(current) + suffix)
            current, size, separator = [], fixed, 0
        current.append(encoded)
        size += separator + cost
    if current:
        bodies.append(prefix + ",".join(current) + suffix)
    return bodies


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
