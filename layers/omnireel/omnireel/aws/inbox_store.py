"""The inbox bucket: read exactly the dropped object version an S3 event names, and tag it with what became of it."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from omnireel.aws.clients import client
from omnireel.core.errors import InvalidRequest, SourceVersionGone
from omnireel.core.s3uri import SourceVersion
from omnireel.runtime.observability import logger

# S3's answers when the version an event names is no longer there: the version was deleted (NoSuchVersion; NoSuchKey
# once no version of the key is left), it is a delete marker (MethodNotAllowed), or, in an unversioned bucket, the key
# now holds another upload (PreconditionFailed: the If-Match ETag no longer matches).
_GONE = {"NoSuchVersion", "NoSuchKey", "404", "MethodNotAllowed", "405"}
_OVERWRITTEN = {"PreconditionFailed", "412"}


def pinned(version: SourceVersion) -> dict[str, str]:
    """The GetObject/PutObjectTagging arguments that address exactly this version.

    A versioned bucket's events carry ``versionId``: read that version (IAM: s3:GetObjectVersion). An unversioned
    (or versioning-suspended: id "null") bucket overwrites in place, so the read is conditional on the event's ETag.
    """
    if version.version_id and version.version_id != "null":
        return {"VersionId": version.version_id}
    if version.etag:
        etag = version.etag.strip('"')  # S3 events carry the ETag unquoted; If-Match takes the quoted form
        return {"IfMatch": f'"{etag}"'}
    return {}


class InboxStore:
    def __init__(self):
        self._s3 = client("s3")

    def read(self, bucket: str, key: str, max_bytes: int, version: SourceVersion, offset: int = 0) -> bytes:
        """Read at most ``max_bytes`` + 1 bytes (enough to tell that a file is too large) of exactly ``version``,
        from byte ``offset`` (a batch file is read in steps; past the end is b"")."""
        try:
            response = self._s3.get_object(
                Bucket=bucket, Key=key, Range=f"bytes={offset}-{offset + max_bytes}", **pinned(version)
            )
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code == "InvalidRange":  # an empty object has no byte 0
                return b""
            if code in _GONE:
                what = f"version {version.version_id} of the file" if "VersionId" in pinned(version) else "the file"
                raise SourceVersionGone(f"{what} no longer exists (deleted before it could be read)") from None
            if code in _OVERWRITTEN:
                raise SourceVersionGone(
                    "the file no longer exists in the uploaded version: it was overwritten before it could be read "
                    "(the newer upload is a job of its own)"
                ) from None
            if code == "InvalidArgument" and "VersionId" in pinned(version):
                raise InvalidRequest("the S3 event names an invalid version id") from None
            raise
        return response["Body"].read()

    def tag(self, bucket: str, key: str, version: SourceVersion, tags: dict[str, str]) -> bool:
        """Tag the version (IAM: s3:PutObjectVersionTagging). In an unversioned bucket only the key can be named, so
        an upload that landed after the read would carry these tags: there, tags are best effort. A courtesy either
        way: the job record and event are the truth, so a failure is logged and reported (False), never raised."""
        target: dict[str, Any] = {k: v for k, v in pinned(version).items() if k == "VersionId"}
        try:
            self._s3.put_object_tagging(
                Bucket=bucket,
                Key=key,
                Tagging={"TagSet": [{"Key": k, "Value": v[:256]} for k, v in tags.items()]},
                **target,
            )
        except ClientError as exc:
            logger.warning("could not tag inbox object", extra={"key": key, "version": target, "error": str(exc)})
            return False
        return True
