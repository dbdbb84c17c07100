"""Batches: line numbering, splitting in checkpointed windows, chunks, identities, the batch.completed schema."""

import json
from pathlib import Path

import jsonschema
import pytest
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import SqsModel
from msgspec.structs import replace

from omnireel.aws.batch_queue import CHUNK_LINES, lines_messages
from omnireel.batches.batch import (
    MAX_LINE_BYTES,
    MAX_LINES,
    Line,
    batch_id_for,
    check_file,
    count_lines,
    line_natural_key,
    split_lines,
)
from omnireel.core.clock import now
from omnireel.core.errors import InvalidRequest
from omnireel.core.ids import job_id_for
from omnireel.core.records import to_json
from omnireel.core.sqs_text import MAX_BATCH_CALL_BYTES, MAX_BATCH_CALL_ENTRIES, MAX_MESSAGE_BYTES, send_groups
from omnireel.events.batch_events import BatchCounts, BatchEvent, BatchManifest, batch_event_id
from omnireel.events.job_events import EventArtifacts, build_job_event, sns_message_attributes
from omnireel.jobs.job import BatchRef, Job, JobStatus
from omnireel.jobs.request import parse_job_request
from scripts.event_schemas import batch_schema

ROOT = Path(__file__).resolve().parents[3]

SAMPLE = (
    b'\xef\xbb\xbf{"prompt": "one"}\r\n'  # line 1 with a BOM and CRLF
    b"\n"  # 2 blank
    b"{not json\n"  # 3
    b"   \t\n"  # 4 blank
    b'{"prompt": "\xff"}\n'  # 5 not UTF-8
    b'{"prompt": "six"}'  # 6, no trailing newline
)


def test_lines_keep_the_files_numbers_and_skip_blank_lines():
    lines, consumed, numbered = split_lines(SAMPLE, 0, final=True)
    assert [line.number for line in lines] == [1, 3, 5, 6]
    assert lines[0].text == '{"prompt": "one"}'  # BOM and CR removed
    assert lines[1].text == "{not json" and lines[1].error is None  # validation happens later, per line
    assert lines[2].text is None and "not UTF-8" in lines[2].error
    assert consumed == len(SAMPLE) and numbered == 6
    assert count_lines(SAMPLE) == 4


@pytest.mark.parametrize("window", [1, 2, 7, 13, 40, 1000])
def test_windowed_split_equals_the_whole_file(window):
    """The splitter's checkpointed steps see exactly the lines a one-shot read sees (so `total` is reachable)."""
    whole, _, _ = split_lines(SAMPLE, 0, final=True)
    offset, line, seen = 0, 0, []
    for _ in range(10 * len(SAMPLE)):
        data = SAMPLE[offset : offset + window]
        final = offset + len(data) >= len(SAMPLE)
        found, consumed, numbered = split_lines(data, line, final=final)
        if consumed == 0 and not final:  # a line longer than the window: read on to its end
            end = SAMPLE.find(b"\n", offset)
            data = SAMPLE[offset : end + 1] if end >= 0 else SAMPLE[offset:]
            found, consumed, numbered = split_lines(data, line, final=True)
        seen += found
        offset, line = offset + consumed, line + numbered
        if offset >= len(SAMPLE):
            break
    assert seen == whole


def test_a_line_over_the_limit_is_a_bad_line_not_a_bad_file():
    big = b'{"prompt": "' + b"x" * MAX_LINE_BYTES + b'"}'
    lines, _, _ = split_lines(b'{"prompt": "a"}\n' + big + b"\n", 0, final=True)
    assert lines[1].number == 2 and lines[1].text is None and str(MAX_LINE_BYTES) in lines[1].error


def test_file_limits():
    assert check_file(b'{"prompt": "a"}\n\n{"prompt": "b"}\n') == 2
    with pytest.raises(InvalidRequest, match="no job lines"):
        check_file(b"\n  \n")
    with pytest.raises(InvalidRequest, match="at most 10000"):
        check_file(b'{"prompt": "a"}\n' * (MAX_LINES + 1))


ENVELOPE = {"kind": "lines", "batch_id": "b" * 36, "attempt": 12, "queued_at": 1_800_000_000}


def _lines_of(bodies: list[str]) -> list[Line]:
    return [Line.from_message(item) for body in bodies for item in json.loads(body)["lines"]]


def test_messages_respect_the_line_bound_and_keep_every_line():
    small = [Line(n, "x" * 10) for n in range(1, 2 * CHUNK_LINES + 2)]
    bodies = lines_messages(ENVELOPE, small)
    assert [len(json.loads(b)["lines"]) for b in bodies] == [CHUNK_LINES, CHUNK_LINES, 1]
    assert _lines_of(bodies) == small
    assert all({k: v for k, v in json.loads(b).items() if k != "lines"} == ENVELOPE for b in bodies)


@pytest.mark.parametrize("char", ["y", "\u00e9", "\u20ac", "\U0001f600", '"', "\\"])
def test_messages_are_sized_by_their_utf8_bytes(char: str):
    """Maximum-length lines (MAX_LINE_BYTES of UTF-8) of 1- to 4-byte characters, and characters JSON escapes: every
    body is at most MAX_MESSAGE_BYTES as SQS counts it (UTF-8 bytes), none is far below it, no line is lost."""
    width = len(char.encode())
    lines = [Line(n, char * (MAX_LINE_BYTES // width)) for n in range(1, 41)]
    bodies = lines_messages(ENVELOPE, lines)
    sizes = [len(body.encode()) for body in bodies]
    assert max(sizes) <= MAX_MESSAGE_BYTES
    per_line = max(len(json.dumps(line.as_message(), ensure_ascii=False).encode()) for line in lines)
    assert all(size > MAX_MESSAGE_BYTES - per_line - 200 for size in sizes[:-1])  # full, not a char estimate
    assert _lines_of(bodies) == lines
    # 4-byte characters are sent as 4 bytes, not as a 12-byte ASCII escape pair
    if char == "\U0001f600":
        assert "\\ud83d" not in bodies[0] and char in bodies[0]


def test_a_line_that_cannot_fit_a_message_becomes_an_error_line():
    raw = "\x01" * MAX_LINE_BYTES  # raw control characters (not JSON): 6 bytes each once escaped
    (body,) = lines_messages(ENVELOPE, [Line(7, raw)])
    (line,) = _lines_of([body])
    assert line.number == 7 and line.text is None and "bytes as a queue message" in (line.error or "")


def test_a_lone_surrogate_travels_ascii_escaped():
    (body,) = lines_messages(ENVELOPE, [Line(1, '{"prompt": "\ud800"}')])
    body.encode("utf-8")  # valid UTF-8 (SQS refuses anything else)
    assert _lines_of([body])[0].text == '{"prompt": "\ud800"}'


def test_send_groups_stay_within_ten_entries_and_one_mebibyte():
    lines = [Line(n, "\U0001f600" * (MAX_LINE_BYTES // 4)) for n in range(1, 201)]
    groups = send_groups(lines_messages(ENVELOPE, lines))
    assert all(len(g) <= MAX_BATCH_CALL_ENTRIES for g in groups)
    assert all(sum(len(b.encode()) for b in g) <= MAX_BATCH_CALL_BYTES for g in groups)
    assert max(sum(len(b.encode()) for b in g) for g in groups) > MAX_BATCH_CALL_BYTES - MAX_MESSAGE_BYTES
    assert _lines_of([b for g in groups for b in g]) == lines
    small = send_groups(lines_messages(ENVELOPE, [Line(n, "x") for n in range(1, 300)]))
    assert [len(g) for g in small] == [10, 2]


def test_identities_are_stable_per_version_and_line():
    key = "inbox:s3://b/prompts/a.jsonl?versionId=v1"
    assert batch_id_for(key) == batch_id_for(key) != batch_id_for(key.replace("v1", "v2"))
    assert job_id_for(line_natural_key(key, 3)) == job_id_for(line_natural_key(key, 3))
    assert job_id_for(line_natural_key(key, 3)) != job_id_for(line_natural_key(key, 4))


def test_job_events_of_batch_jobs_carry_the_batch_and_its_filter_attribute():
    job = Job(
        job_id="0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a11",
        status=JobStatus.SUCCEEDED,
        request=parse_job_request({"prompt": "p"}),
        source="s3://b/prompts/a.jsonl",
        batch=BatchRef(batch_id="7d1f0c4e-2b6a-5c0e-9a51-3f3c1d2e4b5a", line=4),
        created_at="2026-12-01T00:00:00.000Z",
        updated_at="2026-12-01T00:00:00.000Z",
    )
    event = build_job_event(job, EventArtifacts(), now())
    assert event.batch == job.batch
    assert sns_message_attributes(event)["batch_id"]["StringValue"] == job.batch.batch_id
    single = replace(job, batch=None)
    assert "batch_id" not in sns_message_attributes(build_job_event(single, EventArtifacts(), now()))


def test_batch_schema_validates_the_event():
    event = BatchEvent(
        event_id=batch_event_id("b1"),
        occurred_at="2026-12-01T00:00:00.000Z",
        batch_id="b1",
        source="api",
        counts=BatchCounts(total=3, accepted=2, rejected=1, succeeded=2, failed=1, cancelled=0),
        manifest=BatchManifest(s3_uri="s3://a/batches/b1/manifest.jsonl", url="https://x", expires_at="t"),
    )
    validator = jsonschema.Draft202012Validator(batch_schema())
    validator.validate(json.loads(to_json(event)))
    assert sns_message_attributes(event)["event_type"]["StringValue"] == "batch.completed"
    bad = json.loads(to_json(event))
    del bad["counts"]["cancelled"]
    assert list(validator.iter_errors(bad))


@pytest.mark.parametrize("name", ["batch_submit_split.json", "batch_submit_lines.json", "batch_progress.json"])
def test_sample_events_are_sqs_events(name):
    parsed = parse(event=json.loads((ROOT / "events" / name).read_text()), model=SqsModel)
    body = json.loads(parsed.Records[0].body)
    assert body.get("kind") in {"split", "lines"} or body.get("batch")


def test_batch_completed_reaches_the_batchs_webhook_only_when_it_named_one():
    event = BatchEvent(
        event_id=batch_event_id("b2"),
        occurred_at="2026-12-01T00:00:00.000Z",
        batch_id="b2",
        source="api",
        counts=BatchCounts(total=1, accepted=1, rejected=0, succeeded=1, failed=0, cancelled=0),
        manifest=BatchManifest(s3_uri="s3://a/batches/b2/manifest.jsonl", url="https://x", expires_at="t"),
    )
    assert "webhook" not in sns_message_attributes(event)
    event.with_webhook("https://hooks.example.com/omnireel")
    assert sns_message_attributes(event)["webhook"]["StringValue"] == "https://hooks.example.com/omnireel"
    assert "webhook" not in json.loads(to_json(event))  # not part of the published body
