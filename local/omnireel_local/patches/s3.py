"""S3: notifications delivered asynchronously with AWS's event fields, versioned requests authorised as the version's
action, a malformed version id refused, and request bodies kept byte for byte."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any
from urllib.parse import unquote_plus

from .. import fault_injection
from .cards import MOTO_BUG, Context, Patch

log = logging.getLogger("omnireel_local.moto")

# The IAM action AWS checks for a key request that names a version (the Service Authorization Reference for S3).
VERSIONED_S3_ACTIONS = {
    "GetObject": "GetObjectVersion",
    "GetObjectAcl": "GetObjectVersionAcl",
    "PutObjectAcl": "PutObjectVersionAcl",
    "GetObjectTagging": "GetObjectVersionTagging",
    "PutObjectTagging": "PutObjectVersionTagging",
    "DeleteObjectTagging": "DeleteObjectVersionTagging",
    "DeleteObject": "DeleteObjectVersion",
}


def _is_version_id(text: str) -> bool:
    if text == "null":
        return True
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def install_notifications(ctx: Context) -> None:
    from moto.s3 import notifications as s3_notifications

    invoker = ctx.invoker
    original_s3_event = s3_notifications._get_s3_event

    def _get_s3_event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
        event = original_s3_event(event_name, bucket, key, notification_id)
        for record in event["Records"]:
            obj = record["s3"]["object"]
            if bucket.is_versioned and key.version_id not in (None, "null"):
                obj["versionId"] = key.version_id
            obj.setdefault("sequencer", f"{time.time_ns():018X}")
        return event

    s3_notifications._get_s3_event = _get_s3_event

    def _invoke_awslambda(account_id: str, event_body: Any, fn_arn: str, region_name: str) -> None:
        from moto.awslambda.utils import get_backend

        for record in event_body.get("Records", []):
            record.setdefault("userIdentity", {"principalId": f"AWS:{account_id}"})
            record.setdefault("requestParameters", {"sourceIPAddress": "127.0.0.1"})
            record.setdefault(
                "responseElements", {"x-amz-request-id": uuid.uuid4().hex[:16].upper(), "x-amz-id-2": "local"}
            )
            s3 = record.get("s3", {})
            s3.get("bucket", {}).setdefault("ownerIdentity", {"principalId": account_id})
            s3.get("object", {}).setdefault("sequencer", f"{time.time_ns():018X}")

        try:
            fn = get_backend(account_id, region_name).get_function(fn_arn)
        except Exception:  # noqa: BLE001 - a missing function is silently skipped, as moto (and S3) do
            log.warning("S3 notification for a missing function %s", fn_arn)
            return
        s3 = (event_body.get("Records") or [{}])[0].get("s3", {})
        s3_key = f"{s3.get('bucket', {}).get('name')}/{s3.get('object', {}).get('key')}"
        object_key = unquote_plus(s3.get("object", {}).get("key", ""))
        held_s = fault_injection.s3_event_hold(object_key)  # off by default (fault_injection.py), as is:
        deliveries = 2 if fault_injection.duplicate_s3_event(s3_key) else 1
        for _ in range(deliveries):
            if held_s is None:
                invoker.submit(fn, json.dumps(event_body), "s3")
                continue
            fault_injection.record("s3_event_hold", object_key, max_s=held_s)
            released = lambda: fault_injection.s3_event_hold(object_key) is None  # noqa: E731
            invoker.submit_held(fn, json.dumps(event_body), "s3", released, held_s)

    s3_notifications._invoke_awslambda = _invoke_awslambda


def install_versioned_actions(ctx: Context) -> None:
    from moto.s3.responses import S3Response

    set_action = S3Response._set_action

    def _set_action(self: Any, action_resource_type: str, method: str, querystring: dict[str, Any]) -> None:
        if action_resource_type != "KEY" or "versionId" not in querystring:
            return set_action(self, action_resource_type, method, querystring)
        set_action(self, action_resource_type, method, {k: v for k, v in querystring.items() if k != "versionId"})
        self.data["Action"] = VERSIONED_S3_ACTIONS.get(self.data["Action"], self.data["Action"])
        return None

    S3Response._set_action = _set_action


def install_version_ids(ctx: Context) -> None:
    from moto.s3.exceptions import InvalidVersion
    from moto.s3.models import S3Backend

    get_object = S3Backend.get_object

    def _get_object(self: Any, bucket: str, key: str, version_id: Any = None, *args: Any, **kwargs: Any) -> Any:
        if version_id is not None and not _is_version_id(str(version_id)):
            raise InvalidVersion(str(version_id))
        return get_object(self, bucket, key, version_id, *args, **kwargs)

    S3Backend.get_object = _get_object


def install_request_bodies(ctx: Context) -> None:
    from moto.core.request import Request as MotoRequest

    form_parsing = MotoRequest.want_form_data_parsed

    def want_form_data_parsed(self: Any) -> bool:
        return self.method == "POST" and bool(form_parsing.fget(self))

    MotoRequest.want_form_data_parsed = property(want_form_data_parsed)


CARDS = [
    Patch(
        "6",
        "S3 notifications: asynchronous, with AWS's event fields",
        aws="S3 invokes the function asynchronously (retries, on-failure destination) with object.sequencer, "
        "userIdentity, requestParameters, responseElements, bucket.ownerIdentity, and object.versionId in a "
        "versioning-enabled bucket.",
        moto="Runs the notification synchronously inside PutObject, swallows errors, and leaves those fields out.",
        test="tests/e2e/test_inbox_versions.py::test_an_overwrite_before_the_read_runs_each_upload_with_its_own_prompt",
        upstream=MOTO_BUG,
        installs=install_notifications,
    ),
    Patch(
        "6b",
        "A request that names a version is authorised as the version's action",
        aws="GET ?tagging&versionId is s3:GetObjectVersionTagging, PUT ?tagging&versionId "
        "s3:PutObjectVersionTagging, HEAD ?versionId s3:GetObjectVersion.",
        moto="The first matching query parameter names the action: s3:GetObjectVersion, s3:PutObjectTagging, "
        "s3:GetObject.",
        test="tests/e2e/test_inbox_versions.py::test_the_local_stack_answers_versioned_s3_requests_as_aws_does",
        upstream=MOTO_BUG,
        installs=install_versioned_actions,
    ),
    Patch(
        "6c",
        "A malformed version id is 400 InvalidArgument",
        aws='400 InvalidArgument "Invalid version id specified".',
        moto="Looks the string up and answers 404 NoSuchVersion.",
        test="tests/e2e/test_inbox_versions.py::test_the_local_stack_answers_versioned_s3_requests_as_aws_does",
        upstream=MOTO_BUG,
        installs=install_version_ids,
    ),
    Patch(
        "7",
        "A multipart/form-data PutObject body is stored byte for byte",
        aws="Only S3's browser-upload POST is a form; a PutObject body is the object, whatever its Content-Type.",
        moto="werkzeug parses every multipart/form-data request as a form: the object is stored empty.",
        test="tests/e2e/test_pipeline.py::test_api_path_produces_a_decodable_mp4",
        upstream=MOTO_BUG,
        installs=install_request_bodies,
    ),
]
