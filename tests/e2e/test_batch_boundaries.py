"""`make test`'s boundary case of the batch limits (issue 35 item 2): the 1,000-job batch and the 10 MiB drop of
tests/e2e/test_batch_limits.py run in `make test-scale`; this keeps each of their limits crossed in the fast lane, on
the worker's shared stack.

40 lines with every free-text field at its maximum length in 4-byte characters (32 KB of UTF-8 each, ~96 KB once
JSON-escaped) dropped into the inbox by a real S3 PUT: 1.3 MB of UTF-8, 3.8 MB escaped, so the lines' SQS messages
add up to more than SendMessageBatch's 1 MiB per call whichever way they are counted and must be split by bytes (before
issue 25 they were counted in characters: 320,000 characters are two messages' worth, sent as 3.8 MB, and the calls
failed with BatchRequestTooLong). Line 1 is valid and runs the whole
pipeline; the others are refused by their video width alone (a real, fast path). Every line's job ends in exactly one
terminal event, with one batch.completed and the counts adding up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnireel.batches.batch import MAX_FILE_BYTES
from omnireel.core.sqs_text import MAX_BATCH_CALL_BYTES
from tests.support.stack import LocalStack

from .helpers import JobEvents
from .test_batch_limits import _completed, check_batch, max_job

pytestmark = [pytest.mark.e2e]
LINES = 40
TIMEOUT_S = 240


def test_forty_maximum_length_lines_of_four_byte_characters_cross_send_message_batch_limit(
    stack: LocalStack, tmp_path: Path
) -> None:
    emoji = "\U0001f600"  # 4 bytes in UTF-8; 12 as a JSON ASCII escape pair
    rows = [json.dumps(max_job(4 * n, emoji, valid=n == 1), ensure_ascii=False).encode() + b"\n" for n in range(1, 41)]
    data = b"".join(rows)
    assert MAX_BATCH_CALL_BYTES < len(data) < MAX_FILE_BYTES  # over 1 MiB even as UTF-8, a small drop
    file = tmp_path / "boundary.jsonl"
    file.write_bytes(data)
    events = JobEvents(stack)
    try:
        result = stack.cli("batch", str(file), "--wait", "--json", "--timeout", str(TIMEOUT_S),
                           timeout=TIMEOUT_S + 60)  # fmt: skip
        assert result.returncode == 1, result.stderr  # some lines failed: exit 1
        batch = json.loads(result.stdout)
        received = events.until(_completed(batch["batch_id"], LINES), timeout=120)
    finally:
        events.close()
    assert batch["source"].endswith("/prompts/boundary.jsonl") and batch["truncated"] is None
    check_batch(batch, received, total=LINES, valid_lines={1}, reason="video.width")
