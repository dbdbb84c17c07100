"""S3 URIs (s3://bucket/key) and the artifact layout of a job."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Uri:
        parsed = urlparse(uri)
        if parsed.scheme == "s3" and parsed.netloc and parsed.path.strip("/"):
            return cls(parsed.netloc, unquote(parsed.path.lstrip("/")))
        if parsed.scheme == "https" and ".s3" in parsed.netloc:
            # https://bucket.s3.region.amazonaws.com/key (some SageMaker fields use this form)
            return cls(parsed.netloc.split(".s3")[0], unquote(parsed.path.lstrip("/")))
        raise ValueError(f"not an S3 URI: {uri!r}")

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def job_prefix(job_id: str) -> str:
    return f"jobs/{job_id}/"


def image_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}image.png"


def video_request_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}video-request.multipart"


def video_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}video.mp4"
