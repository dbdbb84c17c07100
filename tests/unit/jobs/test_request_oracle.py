"""``omnireel.jobs.request`` against the pydantic model it replaced (``request_oracle``, test-only): the same inputs are
accepted with the same values (and the same stored JSON), and refused with the same message, word for word.

Inputs: every JSON body of the API corpus and the S3 corpus, plus edge cases generated around each field's rules
(types, bounds, lengths, nulls, nesting, unknown fields, several problems at once).
"""

from __future__ import annotations

import base64
import itertools
import json
import random
from typing import Any

import msgspec
import pytest

from omnireel.core.errors import InvalidRequest
from omnireel.jobs.job import fingerprint
from omnireel.jobs.request import parse_job_request, parse_job_request_json
from tests.support.corpus import CORPUS, expand, load_cases
from tests.unit.jobs import request_oracle as oracle


def _outcome_new(raw: str | bytes | None, data: Any, steps: int | None) -> tuple[str, Any]:
    try:
        request = parse_job_request_json(raw, default_video_steps=steps) if raw is not None else (
            parse_job_request(data, default_video_steps=steps)
        )  # fmt: skip
    except InvalidRequest as exc:
        return "refused", (exc.code, exc.message)
    return "accepted", (msgspec.to_builtins(request), msgspec.json.encode(request).decode(), fingerprint(request))


def _outcome_old(raw: str | bytes | None, data: Any, steps: int | None) -> tuple[str, Any]:
    try:
        request = oracle.parse_job_request_json(raw, default_video_steps=steps) if raw is not None else (
            oracle.parse_job_request(data, default_video_steps=steps)
        )  # fmt: skip
    except InvalidRequest as exc:
        return "refused", (exc.code, exc.message)
    return "accepted", (request.model_dump(mode="json"), request.model_dump_json(), _old_fingerprint(request))


def _old_fingerprint(request: oracle.JobRequest) -> str:
    import hashlib

    data = request.model_dump(mode="json")
    for section, names in {
        "": ("webhook", "webhook_events", "max_queue_seconds"),
        "video": ("prompt", "negative_prompt"),
    }.items():
        target = data[section] if section else data
        for name in names:
            if target.get(name) is None:
                target.pop(name, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _corpus_bodies() -> list[str | bytes]:
    bodies: list[str | bytes] = []
    for case in load_cases("api"):
        if case.get("path", "/jobs") != "/jobs" or case.get("method", "POST") != "POST":
            continue
        if "body" in case:
            bodies.append(expand(case["body"]))
        elif "body_b64" in case:
            bodies.append(base64.b64decode(case["body_b64"]))
        elif "json" in case:
            bodies.append(json.dumps(case["json"]))
    files = CORPUS / "s3" / "files"
    bodies += [path.read_bytes() for path in sorted(files.rglob("*.json"))]
    return bodies


@pytest.mark.parametrize("body", _corpus_bodies())
def test_corpus_bodies_give_the_same_outcome(body):
    assert _outcome_new(body, None, None) == _outcome_old(body, None, None)
    assert _outcome_new(body, None, 4) == _outcome_old(body, None, 4)


# Values to try for every field: each kind's boundaries and every wrong JSON type.
_ANY = [None, True, False, 0, 1, -1, 1.0, 0.5, "x", "", "\ud800", [], {}, ["job.failed"], float("nan"), 2**63]
_FIELD_VALUES: dict[str, list[Any]] = {
    "prompt": ["a", " ", "\u200b\ufeff", "a\x00b", "x" * 2000, "x" * 2001, "é" * 2000, "猫"],
    "negative_prompt": ["", "n", "a\x00", "x" * 2000, "x" * 2001],
    "seed": [0, 2**32 - 1, 2**32, -1, 10**30, 7.0, "7"],
    "guidance_scale": [0, 0.0, 20, 20.0, 20.000001, -0.0, -1e-9, 7, 3.25, float("inf"), float("-inf"), 10**400, 2**64],
    "webhook": ["https://example.com/h", "http://example.com", "ftp://x", "https://u:p@e.com", "https://e.com/#f",
                "https://e.com#", "https://e.com:0/", "https://e.com:99999/", "https:///x", "https://e.com/ü",
                "https://e .com", "https://e.com/" + "x" * 2048],
    "webhook_events": [[], ["job.failed"], ["job.failed", "job.failed"], ["job.succeeded", "nope"], [1, "x"],
                       ["job.image_ready", "job.succeeded", "job.failed", "job.cancelled"], ["job.failed"] * 5,
                       ["job.queued", "job.image_ready", "job.succeeded", "job.failed", "job.cancelled", "job.expired"],
                       ["job.queued", "job.expired"], ["job.failed"] * 7, ["a"] * 6, "job.failed", {"job.failed": 1},
                       ["\ud800"]],
}  # fmt: skip
_IMAGE_VALUES: dict[str, list[Any]] = {
    "size": ["1024x1024", "256x2048", "240x256", "2064x256", "257x256", "1024X1024", "1024x1024 ", "big", "10x10",
             "99999x1", "0512x0512"],
    "num_inference_steps": [1, 50, 0, 51, 4.0],
}  # fmt: skip
_VIDEO_VALUES: dict[str, list[Any]] = {
    "width": [128, 1280, 112, 1296, 130, 100, 481, 2000, 480.0],
    "height": [128, 1280, 112, 1296, 330],
    "num_frames": [5, 161, 1, 4, 6, 16, 165, 200, 17.0],
    "fps": [1, 30, 0, 31],
    "num_inference_steps": [1, 100, 0, 101],
    "prompt": ["m", "", " \t", "a\x00", "x" * 2001],
    "negative_prompt": ["", "a\x00", "x" * 2001],
}


def _generated() -> list[Any]:
    cases: list[Any] = [
        None,
        "str",
        5,
        [],
        ["prompt"],
        {},
        {"Prompt": "x"},
        {"prompt": "p", "x": 1, "y": 2},
        {"prompt": "p", "\ud800": 1},
        {"prompt": "p", "video": {"x" * 300: 1}},
    ]
    for name, values in _FIELD_VALUES.items():
        for value in [*values, *_ANY]:
            cases.append({"prompt": "p", name: value})
            cases.append({"prompt": "p", "webhook": "https://example.com/h", name: value})
    for section, table in (("image", _IMAGE_VALUES), ("video", _VIDEO_VALUES)):
        cases += [{"prompt": "p", section: value} for value in _ANY]
        for name, values in table.items():
            for value in [*values, *_ANY]:
                cases.append({"prompt": "p", section: {name: value}})
        cases.append({"prompt": "p", section: {"unknown": 1, **{k: v[-1] for k, v in table.items()}}})
    # Several problems at once, in random combinations (seeded: the same cases every run).
    rng = random.Random(11)
    fields = list(_FIELD_VALUES.items())
    for _ in range(300):
        body: dict[str, Any] = {}
        for name, values in rng.sample(fields, rng.randint(0, len(fields))):
            body[name] = rng.choice([*values, *_ANY])
        for section, table in (("image", _IMAGE_VALUES), ("video", _VIDEO_VALUES)):
            if rng.random() < 0.5:
                body[section] = {
                    k: rng.choice(v) for k, v in rng.sample(list(table.items()), rng.randint(0, min(3, len(table))))
                }
        if rng.random() < 0.2:
            body["extra_" + str(rng.randint(0, 9))] = 1
        cases.append(body)
    return cases


@pytest.mark.parametrize("data", _generated())
def test_generated_inputs_give_the_same_outcome(data):
    for steps in (None, 4):
        assert _outcome_new(None, data, steps) == _outcome_old(None, data, steps)


def test_the_generated_inputs_cover_both_outcomes_and_every_message_kind():
    outcomes = [_outcome_old(None, data, None) for data in _generated()]
    refused = [detail[1] for kind, detail in outcomes if kind == "refused"]
    messages = {part.split(": ", 1)[-1] for message in refused for part in message.split("; ")}
    assert sum(kind == "accepted" for kind, _ in outcomes) > 50
    for wording in ("Field required", "unknown field", "Input should be a valid integer", "a finite number",
                    "a multiple of 16", "greater than or equal to", "less than or equal to", "at least 1 character",
                    "at most 2000 characters", "List should have at most 6 items", "valid dictionary", "valid list",
                    "must be 4k+1", "must not be blank", "webhook_events needs a webhook"):  # fmt: skip
        assert any(wording in m for m in messages), wording


def test_json_documents_round_trip_like_the_stored_request_json():
    """A record's ``request_json`` written by either version reads back as the same request."""
    for data in itertools.islice((d for d in _generated() if _outcome_old(None, d, None)[0] == "accepted"), 200):
        old = oracle.parse_job_request(data)
        new = parse_job_request(data)
        assert msgspec.json.decode(old.model_dump_json(), type=type(new)) == new
        assert oracle.JobRequest.model_validate_json(msgspec.json.encode(new)) == old
