"""``POST /batches/uploads``: a batch too large for a Lambda request, uploaded by an app without S3 credentials.

A Lambda proxy request is at most 6 MB (6,291,456 bytes of event: the body, JSON-escaped or base64-encoded, plus the
request's other fields), so ``POST /batches`` cannot carry a 10 MB JSONL file. Instead the caller asks for an upload:
it gets a presigned S3 PUT URL for one key under ``prompts/uploads/``, valid ``UPLOAD_SECONDS``, signed for the exact
byte size it declared (at most ``batch.MAX_FILE_BYTES``: S3 refuses any other Content-Length), and the id of the batch
the file will become. The file then runs as a dropped ``prompts/*.jsonl`` (``jobs.inbox`` -> ``batches.intake``),
owned by the caller: only they see the batch and its jobs, and its ``batch.completed`` goes to the webhook they named.
One upload is one batch: a second PUT to the same URL is a new object version that names the same batch (ignored).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import timedelta

from omnireel.aws.batch_uploads import BatchUploads, Upload
from omnireel.batches.batch import MAX_FILE_BYTES, batch_id_for
from omnireel.core.clock import iso, now
from omnireel.core.errors import InvalidRequest

UPLOADS_PREFIX = "prompts/uploads/"
UPLOAD_SECONDS = 900  # 15 minutes to start the PUT (S3 checks the expiry when the request arrives)
_KEY = re.compile(r"^prompts/uploads/(?P<owner>[0-9a-f]{32})/(?P<upload_id>[0-9a-f-]{36})\.jsonl$")


def owner_digest(owner: str) -> str:
    """The key's owner segment: the caller's scope, hashed (a key is not a place for an ARN)."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def upload_key(owner: str, upload_id: str) -> str:
    return f"{UPLOADS_PREFIX}{owner_digest(owner)}/{upload_id}.jsonl"


def start_upload(
    *, owner: str, size: object, webhook: str | None, uploads: BatchUploads, owner_arn: str | None = None
) -> dict[str, object]:
    """Reserve an upload for ``owner`` and sign its URL. ``size``: the file's exact byte count, 1..MAX_FILE_BYTES."""
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_FILE_BYTES:
        raise InvalidRequest(f"size: the JSONL file's exact size in bytes, 1 to {MAX_FILE_BYTES} (10 MB)")
    upload_id = str(uuid.uuid4())
    natural_key = f"api:{owner}:upload:{upload_id}"
    expires = iso(now() + timedelta(seconds=UPLOAD_SECONDS))
    upload = Upload(upload_id=upload_id, owner=owner, owner_arn=owner_arn, key=upload_key(owner, upload_id), size=size,
                    natural_key=natural_key, batch_id=batch_id_for(natural_key), webhook=webhook,
                    expires_at_iso=expires)  # fmt: skip
    uploads.reserve(upload)  # before the URL exists: a file can never arrive for an unrecorded upload
    url = uploads.presign_put(upload.key, size, UPLOAD_SECONDS)
    return {
        "upload_id": upload_id,
        "batch_id": upload.batch_id,
        "upload": {"url": url, "method": "PUT", "headers": {"Content-Length": str(size)}, "expires_at": expires},
        "max_bytes": MAX_FILE_BYTES,
        "status_url": f"/batches/{upload.batch_id}",
    }


def upload_of(key: str, uploads: BatchUploads | None) -> Upload:
    """The reservation an uploaded file's key names (``InvalidRequest`` if there is none, or not for that key): the
    owner and webhook come from it, never from the key or the object."""
    found = _KEY.match(key)
    upload = uploads.find(found["upload_id"]) if found and uploads is not None else None
    if upload is None or upload.key != key:
        raise InvalidRequest(f"{UPLOADS_PREFIX} is for files uploaded through POST /batches/uploads; no upload was "
                             "reserved for this key")  # fmt: skip
    return upload
