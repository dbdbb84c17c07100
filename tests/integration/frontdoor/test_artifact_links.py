"""Defect 5 on the wire: the artifact links in GET /jobs/{id} and in the job.succeeded event are SigV4 presigned URLs
(AWS4-HMAC-SHA256, credential scoped to the stack's region and s3, an explicit X-Amz-Expires) that download."""

from __future__ import annotations

import time
import urllib.request
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.frontdoor import FrontDoorClient, event_for

JOB_TIMEOUT_S = 60.0


def _check_sigv4(url: str, region: str) -> None:
    query = parse_qs(urlsplit(url).query)
    assert "AWSAccessKeyId" not in query and "Signature" not in query, f"a SigV2 URL: {url}"
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Credential"][0].endswith(f"/{region}/s3/aws4_request")
    assert query["X-Amz-SignedHeaders"] == ["host"]
    assert 60 <= int(query["X-Amz-Expires"][0]) <= 43200
    assert len(query["X-Amz-Signature"][0]) == 64


def _wait_succeeded(door: FrontDoorClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job = door.get_job(job_id).json
        if job["status"] in ("succeeded", "failed"):
            assert job["status"] == "succeeded", job.get("error")
            return job
        time.sleep(0.2)  # polling interval of a bounded wait, not synchronisation
    raise AssertionError(f"job {job_id} did not finish within {JOB_TIMEOUT_S} s")


def test_artifact_links_are_sigv4_presigned_urls_that_download(door: FrontDoorClient, door_state) -> None:
    accepted = door.post_json({"prompt": "a lighthouse at dusk", "seed": 5})
    assert accepted.status == 202, accepted.body
    job = _wait_succeeded(door, accepted.json["job_id"])
    region = door_state["region"]
    links = job["artifacts"]
    assert {"image", "video"} <= set(links)
    for link in links.values():
        _check_sigv4(link["url"], region)
    with urllib.request.urlopen(links["image"]["url"], timeout=30) as response:  # noqa: S310 - loopback
        assert response.read(8) == b"\x89PNG\r\n\x1a\n"

    event = event_for(door_state, job["job_id"])
    assert event["event_type"] == "job.succeeded"
    for link in event["artifacts"].values():
        if link:
            _check_sigv4(link["url"], region)
    with urllib.request.urlopen(event["artifacts"]["video"]["url"], timeout=30) as response:  # noqa: S310
        assert len(response.read()) > 0
