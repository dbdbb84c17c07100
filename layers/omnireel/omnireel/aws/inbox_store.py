"""The inbox bucket: read a dropped prompt file and tag it with what became of it."""

from __future__ import annotations

from botocore.exceptions import ClientError

from omnireel.aws.clients import client
from omnireel.errors import InvalidRequest


class InboxStore:
    def __init__(self):
        self._s3 = client("s3")

    def read(self, bucket: str, key: str, max_bytes: int) -> bytes:
        """Read at most ``max_bytes`` + 1 bytes (enough to tell that a file is too large)."""
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{max_bytes}")
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "InvalidRange":  # an empty object has no byte 0
                return b""
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise InvalidRequest("the file no longer exists (deleted before it could be read)") from None
            raise
        return response["Body"].read()

    def tag(self, bucket: str, key: str, tags: dict[str, str]) -> None:
        self._s3.put_object_tagging(
            Bucket=bucket,
            Key=key,
            Tagging={"TagSet": [{"Key": k, "Value": v[:256]} for k, v in tags.items()]},
        )
