"""Echoed caller input stays bounded: one helper (omnireel.core.bounded) behind every surface that quotes it."""

from datetime import UTC, datetime

import pytest

from omnireel.core.bounded import MAX_ECHO_CHARS, MAX_MESSAGE_CHARS, bounded
from omnireel.core.errors import InvalidRequest
from omnireel.events.job_events import EventArtifacts, build_job_event
from omnireel.jobs.inbox import parse_inbox_file
from omnireel.jobs.job import Job, JobError, JobStatus
from omnireel.jobs.request import parse_job_request, parse_job_request_json


@pytest.mark.parametrize("size", [0, 1, MAX_MESSAGE_CHARS, MAX_MESSAGE_CHARS + 1, 10_000, 7_000_000])
def test_bounded_keeps_short_text_and_cuts_long_text_to_the_limit(size: int) -> None:
    text = "x" * size
    out = bounded(text)
    if size <= MAX_MESSAGE_CHARS:
        assert out == text
    else:
        assert len(out) == MAX_MESSAGE_CHARS
        assert out.endswith(f"…(+{size - MAX_MESSAGE_CHARS + len(out) - out.index('…')} chars)")


def test_the_marker_counts_what_was_left_out() -> None:
    out = bounded("a" * 100, 40)
    kept = out[: out.index("…")]
    assert len(out) == 40 and f"(+{100 - len(kept)} chars)" in out


def test_a_huge_unknown_field_name_gives_a_bounded_message() -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_job_request({"prompt": "a", "x" * 100_000: 1})
    message = info.value.message
    assert len(message) <= MAX_MESSAGE_CHARS
    assert message.startswith("x" * (MAX_ECHO_CHARS - 20)) and ": unknown field" in message


def test_thousands_of_unknown_fields_give_a_bounded_message() -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_job_request({"prompt": "a", **{f"f{i}": i for i in range(5000)}})
    assert len(info.value.message) <= MAX_MESSAGE_CHARS
    assert info.value.message.startswith("f0: unknown field; f1: unknown field")


def test_a_json_error_message_is_bounded() -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_job_request_json("{" + '"a":1,' * 200_000 + "x")
    assert len(info.value.message) <= MAX_MESSAGE_CHARS


def test_an_inbox_file_with_a_huge_field_name_is_rejected_with_a_bounded_reason() -> None:
    data = ('{"prompt": "a", "' + "k" * 60_000 + '": 1}').encode()
    with pytest.raises(InvalidRequest) as info:
        parse_inbox_file("prompts/x.json", data)
    assert len(info.value.message) <= MAX_MESSAGE_CHARS


def test_a_job_error_and_its_event_carry_at_most_1_kb_of_message() -> None:
    error = JobError(stage="render_video", code="VideoRenderFailed", message="model said: " + "e" * 50_000)
    assert len(error.message) == MAX_MESSAGE_CHARS
    job = Job(
        job_id="00000000-0000-4000-8000-000000000000",
        status=JobStatus.FAILED,
        source="api",
        request=None,
        error=error,
        created_at="2026-12-01T00:00:00.000Z",
        updated_at="2026-12-01T00:00:00.000Z",
    )
    event = build_job_event(job, EventArtifacts(), datetime.now(UTC))
    assert event.error is not None and len(event.error.message) == MAX_MESSAGE_CHARS
