"""The artifacts bucket: job outputs, staged requests, presigned links."""

from __future__ import annotations

from datetime import timedelta

from botocore.exceptions import ClientError

from omnireel.aws.clients import client
from omnireel.core.clock import iso, now
from omnireel.core.errors import ArtifactAccessDenied
from omnireel.core.s3uri import S3Uri

_MISSING = {"404", "NoSuchKey", "NotFound"}
_DENIED = {"403", "AccessDenied", "Forbidden"}


class ArtifactStore:
    def __init__(self, bucket: str):
        self.bucket = bucket
        self._s3 = client("s3")

    def put(self, key: str, body: bytes, content_type: str) -> S3Uri:
        self._s3.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType=content_type, ServerSideEncryption="AES256"
        )
        return S3Uri(self.bucket, key)

    def read(self, uri: S3Uri, *, max_bytes: int | None = None) -> bytes:
        kwargs = {"Range": f"bytes=0-{max_bytes - 1}"} if max_bytes else {}
        return self._s3.get_object(Bucket=uri.bucket, Key=uri.key, **kwargs)["Body"].read()

    def read_range(self, uri: S3Uri, offset: int, length: int) -> bytes:
        """Bytes ``offset .. offset+length-1`` (fewer at the end of the object)."""
        response = self._s3.get_object(Bucket=uri.bucket, Key=uri.key, Range=f"bytes={offset}-{offset + length - 1}")
        return response["Body"].read()

    def read_head(self, uri: S3Uri, length: int) -> tuple[bytes, int] | None:
        """The first ``length`` bytes of the object and its whole size (from the ranged GET's ``Content-Range``), or
        None if it does not exist: what a size check plus a first read learn, in one request.

        An empty object has no byte to range over (S3 answers 416 InvalidRange): ``(b"", 0)``. Missing and denied
        are told apart as in ``size``.
        """
        try:
            response = self._s3.get_object(Bucket=uri.bucket, Key=uri.key, Range=f"bytes=0-{length - 1}")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":
                return b"", 0
            self._raise_unless_missing(exc, uri, "GetObject")
            return None
        data = response["Body"].read()
        total = (response.get("ContentRange") or "").rpartition("/")[2]
        return data, int(total) if total.isdigit() else len(data)

    def size(self, uri: S3Uri) -> int | None:
        """Object size in bytes, or None if it does not exist.

        S3 answers a HeadObject of a missing key with 404 only to a caller allowed ``s3:ListBucket`` on the bucket;
        without it the answer is 403 whether or not the object exists. A 403 is therefore never read as "missing":
        it raises ``ArtifactAccessDenied`` naming the permission to grant.
        """
        try:
            return self._s3.head_object(Bucket=uri.bucket, Key=uri.key)["ContentLength"]
        except ClientError as exc:
            self._raise_unless_missing(exc, uri, "HeadObject")
            return None

    @staticmethod
    def _raise_unless_missing(exc: ClientError, uri: S3Uri, operation: str) -> None:
        """Return if ``exc`` says the object does not exist; raise ``ArtifactAccessDenied`` for a 403, else ``exc``."""
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if error.get("Code") in _MISSING:
            return
        if error.get("Code") in _DENIED or status == 403:
            raise ArtifactAccessDenied(
                f"{uri}: S3 denied {operation} (403), so it cannot tell whether the object exists; the function's "
                f"role needs s3:GetObject on the object and s3:ListBucket on bucket {uri.bucket} for this prefix"
            ) from exc
        raise exc

    def content_type(self, uri: S3Uri) -> str:
        return self._s3.head_object(Bucket=uri.bucket, Key=uri.key)["ContentType"]

    def copy(self, source: S3Uri, key: str, content_type: str) -> S3Uri:
        self._s3.copy_object(
            Bucket=self.bucket,
            Key=key,
            CopySource={"Bucket": source.bucket, "Key": source.key},
            ContentType=content_type,
            MetadataDirective="REPLACE",
            ServerSideEncryption="AES256",
        )
        return S3Uri(self.bucket, key)

    def presign(self, uri: S3Uri, seconds: int) -> tuple[str, str]:
        """A presigned GET URL and the ISO time it expires."""
        url = self._s3.generate_presigned_url(
            "get_object", Params={"Bucket": uri.bucket, "Key": uri.key}, ExpiresIn=seconds
        )
        return url, iso(now() + timedelta(seconds=seconds))
