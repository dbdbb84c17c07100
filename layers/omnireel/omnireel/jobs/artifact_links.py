"""A job's artifacts as presigned download links (the terminal event and GET /jobs/{id} both carry them)."""

from __future__ import annotations

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.core.records import to_dict
from omnireel.core.s3uri import S3Uri
from omnireel.events.job_events import ArtifactLink, EventArtifacts
from omnireel.jobs.job import Job


def artifact_links(job: Job, artifacts: ArtifactStore, seconds: int) -> EventArtifacts:
    links: dict[str, ArtifactLink] = {}
    for name, uri in to_dict(job.artifacts, omit_none=True).items():
        url, expires_at = artifacts.presign(S3Uri.parse(uri), seconds)
        links[name] = ArtifactLink(s3_uri=uri, url=url, expires_at=expires_at)
    return EventArtifacts(**links)
