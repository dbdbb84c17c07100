"""Batches: many job requests in one submission (a ``prompts/*.jsonl`` drop or ``POST /batches``).

Each line becomes one normal job through the same validation (``request.parse_job_request_json``) and submission
(``submission.submit_job``) as a single job; a bad line becomes one failed job whose reason names its line. A line's
job id derives from the batch's natural key and the line number, so the same object version (or the same
``Idempotency-Key``) never makes a line's job twice, however often the fan-out is retried.

This module is the pure part: limits, identities, splitting bytes into numbered lines (the batch queue's adapter,
``omnireel.aws.batch_queue``, packs lines into queue messages).
"""

from __future__ import annotations

from dataclasses import dataclass

from omnireel.core.errors import InvalidRequest
from omnireel.core.ids import job_id_for

MAX_LINES = 10_000
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_API_JOBS = 1_000
MAX_LINE_BYTES = 64 * 1024  # the same bound as a single dropped file (inbox.MAX_FILE_BYTES)
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
