"""S3 URIs (``s3://bucket/key``), as records, events and the model endpoints name objects, and object versions."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import msgspec


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


class SourceVersion(msgspec.Struct, frozen=True, kw_only=True):
    """The exact S3 object version a dropped file's job was read from (as the S3 event named it)."""

    version_id: str | None = None  # S3 versionId; null when the bucket is not versioned
    etag: str | None = None  # the object's ETag, as the S3 event carried it
