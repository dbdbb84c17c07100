"""Issue 34 item 5: the CLI honours a 429 TooManyPendingJobs as the client does (it calls the API through it), against
the scripted API on loopback: the submit waits the Retry-After, resends with the same Idempotency-Key and gets its job;
a 429 that outlasts the attempts is an infrastructure error (exit 3) that names the limit, not a usage error."""

from __future__ import annotations

import pytest

from omnireel_cli import jobs
from omnireel_cli.errors import InfraError
from omnireel_cli.target import Target

from .conftest import ACCEPTED

TOO_MANY = {"error": {"code": "TooManyPendingJobs", "message": "2 of this caller's jobs are accepted and not finished"}}
FIELDS = {
    "Retry-After": "30",
    "RateLimit-Policy": '"pending";q=2;qu="concurrent-requests"',
    "RateLimit": '"pending";r=0',
}


def _target(url: str) -> Target:
    credentials = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}
    return Target(name="scripted", api_url=url, region="eu-west-1", outputs={}, credentials=credentials, sign=True)


def test_omnireel_submit_waits_out_a_429_and_keeps_its_key(api, monkeypatch) -> None:
    from omnireel_client import transport

    url, script = api
    script.answers = [(429, TOO_MANY, FIELDS, 0), (202, ACCEPTED, {}, 0)]
    pauses: list[float] = []
    monkeypatch.setattr(transport.time, "sleep", lambda s: pauses.append(s) if s else None)
    job = jobs.submit(_target(url), {"prompt": "p"})
    assert job.job_id == ACCEPTED["job_id"]
    assert len({seen["headers"]["Idempotency-Key"] for seen in script.seen}) == 1 and len(script.seen) == 2
    assert pauses and pauses[0] >= 30  # the API's Retry-After (before issue 34: cut to 10 s)


def test_a_429_that_lasts_is_an_infrastructure_error_naming_the_limit(api, monkeypatch) -> None:
    from omnireel_client import transport

    url, script = api
    script.answers = [(429, TOO_MANY, FIELDS, 0)]
    monkeypatch.setattr(transport.time, "sleep", lambda s: None)
    with pytest.raises(InfraError) as caught:
        jobs.submit(_target(url), {"prompt": "p"})
    assert "TooManyPendingJobs (HTTP 429)" in str(caught.value)
