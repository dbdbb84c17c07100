"""Batch uploads (``POST /batches/uploads``): the reservation an upload URL is issued with, and the URL itself.

An app without S3 credentials runs a batch larger than a Lambda request (6 MB) by PUTting its JSONL file to a
presigned URL. The API function signs the URL for one key under ``prompts/uploads/`` (its role may put nothing else:
template.yaml) and records who asked in the batches table first, as the item (``batch_id`` = the upload id, ``item`` =
``upload``): the inbox function reads it when the file's S3 event arrives, so the batch is owned by that caller and
nobody else can claim it -- an S3 key or object metadata, which anyone allowed to write the bucket can choose, never
says who owns a batch. The item carries no ``open_shard``: the reconciler's index never sees it; it expires by TTL.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any

import msgspec

from omnireel.aws.clients import client
from omnireel.aws.dynamodb_values import from_attributes, to_attributes
from omnireel.core.records import to_dict

UPLOAD_ITEM = "upload"


class Upload(msgspec.Struct, kw_only=True, frozen=True):
    upload_id: str
    owner: str
    owner_arn: str | None = None  # the caller's ARN when it asked, for people reading the record; never a key
    key: str  # the one S3 key the URL may put: prompts/uploads/<owner digest>/<upload id>.jsonl
    size: int  # the exact Content-Length the URL is signed for
    natural_key: str  # the batch's: api:<owner>:upload:<upload id>
    batch_id: str
    webhook: str | None = None
    expires_at_iso: str  # when the URL stops working


class BatchUploads:
    def __init__(self, table_name: str, bucket: str | None = None, ttl_days: int = 30):
        self._table = table_name
        self._bucket = bucket
        self._ttl_seconds = ttl_days * 86400

    @cached_property
    def _ddb(self) -> Any:
        return client("dynamodb")

    @cached_property
    def _s3(self) -> Any:
        return client("s3")

    def reserve(self, upload: Upload) -> None:
        """Record the upload before its URL is handed out (a new upload id every time: a conditional put)."""
        record = to_dict(upload, omit_none=True)
        record["batch"] = record.pop("batch_id")  # the table's key attribute holds the upload id
        record.pop("upload_id")
        item = {**record, "batch_id": upload.upload_id, "item": UPLOAD_ITEM,
                "expires_at": int(time.time()) + self._ttl_seconds}  # fmt: skip
        self._ddb.put_item(TableName=self._table, Item=to_attributes(item),
                           ConditionExpression="attribute_not_exists(batch_id)")  # fmt: skip

    def find(self, upload_id: str) -> Upload | None:
        found = self._ddb.get_item(TableName=self._table, ConsistentRead=True,
                                   Key={"batch_id": {"S": upload_id}, "item": {"S": UPLOAD_ITEM}})  # fmt: skip
        if "Item" not in found:
            return None
        item = from_attributes(found["Item"])
        item["upload_id"] = item.pop("batch_id")
        item["batch_id"] = item.pop("batch")
        return msgspec.convert({k: v for k, v in item.items() if k in Upload.__struct_fields__}, Upload)

    def presign_put(self, key: str, size: int, seconds: int) -> str:
        """A URL that PUTs exactly ``size`` bytes (Content-Length is a signed header) to ``key``, for ``seconds``."""
        if self._bucket is None:
            raise RuntimeError("INBOX_BUCKET is not set: uploads are not configured")
        url: str = self._s3.generate_presigned_url(
            "put_object", Params={"Bucket": self._bucket, "Key": key, "ContentLength": size}, ExpiresIn=seconds
        )
        return url
