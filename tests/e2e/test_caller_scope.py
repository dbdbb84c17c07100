"""Issue 33 item 10 on the local stack, through the front door: who a caller is.

- Callers are keyed on the IAM unique id API Gateway reports (``userId``), not on a name: a user (or role) deleted and
  re-created with the same name is a new caller -- none of the old one's jobs, keys or webhook secret.
- ``CallerScope=session`` gives each session of a role its own jobs and secret; the default (``role``) keeps every
  session of a role one caller (an app's replicas), as documented.

The callers are scratch principals the developer identity may create (``<stack>-scratch-*``), each with only
``execute-api:Invoke``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials

from omnireel_local import home as homedir
from tests.support.frontdoor import FrontDoorClient, aws, developer_door, invoke_policy, new_role, session_of
from tests.support.stack import LocalStack, reconfigured

from .helpers import SMALL_MEDIA

pytestmark = pytest.mark.e2e

AWS_USER_ID = re.compile(r"^AIDA[A-Z2-7]{17}$")  # IAM unique ids: a prefix by kind, 21 characters in all
AWS_ROLE_ID = re.compile(r"^AROA[A-Z2-7]{17}$")


def _door(state: dict[str, Any], credentials: Credentials) -> FrontDoorClient:
    return FrontDoorClient(state["api_url"], state["region"], credentials)


def _create_user(state: dict[str, Any], name: str) -> tuple[dict[str, Any], Credentials]:
    iam = aws(state, "iam")
    user = iam.create_user(UserName=name)["User"]
    iam.put_user_policy(UserName=name, PolicyName="invoke", PolicyDocument=invoke_policy(state))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return user, Credentials(key["AccessKeyId"], key["SecretAccessKey"])


def _delete_user(state: dict[str, Any], name: str, access_key: str) -> None:
    iam = aws(state, "iam")
    iam.delete_access_key(UserName=name, AccessKeyId=access_key)
    iam.delete_user_policy(UserName=name, PolicyName="invoke")
    iam.delete_user(UserName=name)


def _submit(door: FrontDoorClient, key: str, prompt: str = "who am I") -> dict[str, Any]:
    reply = door.post_json({"prompt": prompt, **SMALL_MEDIA}, ("Idempotency-Key", key))
    assert reply.status == 202, reply.body
    return {"job_id": reply.json["job_id"], "replayed": reply.header("Idempotent-Replayed")}


def _listed(door: FrontDoorClient) -> set[str]:
    reply = door.request("GET", "/jobs?limit=100", b"", [])
    assert reply.status == 200, reply.body
    return {job["job_id"] for job in reply.json["jobs"]}


def _secret(door: FrontDoorClient) -> str:
    reply = door.request("GET", "/webhooks/secret", b"", [])
    assert reply.status == 200, reply.body
    return str(reply.json["secret"])


def _record(state: dict[str, Any], job_id: str) -> dict[str, Any]:
    table = state["outputs"]["JobsTableName"]
    item = aws(state, "dynamodb").get_item(TableName=table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)
    return {k: v.get("S") for k, v in item["Item"].items()}


# ---------------------------------------------------------------- unique ids, not names (default stack)
def test_a_user_deleted_and_re_created_with_the_same_name_is_a_new_caller(stack: LocalStack) -> None:
    state = stack.state()
    name = f"{homedir.STACK_NAME}-scratch-recreated-{uuid.uuid4().hex[:8]}"
    key = f"recreated-{uuid.uuid4().hex}"

    first, first_keys = _create_user(state, name)
    assert AWS_USER_ID.match(first["UserId"]), first["UserId"]  # as IAM issues it (moto: 20 lower-case characters)
    before = _door(state, first_keys)
    job = _submit(before, key)["job_id"]
    old_secret = _secret(before)
    assert before.get_job(job).status == 200 and job in _listed(before)
    record = _record(state, job)  # the scope is the unique id; the ARN is kept beside it for people
    assert (record["owner"], record["owner_arn"]) == (first["UserId"], first["Arn"])
    _delete_user(state, name, first_keys.access_key)

    again, again_keys = _create_user(state, name)
    assert again["Arn"] == first["Arn"] and again["UserId"] != first["UserId"], (first, again)
    after = _door(state, again_keys)
    theirs = after.get_job(job)
    assert theirs.status == 404 and theirs.json["error"]["code"] == "JobNotFound", theirs.body
    assert job not in _listed(after)
    assert _secret(after) != old_secret, "a re-created user must not inherit the old user's webhook secret"
    retried = _submit(after, key)  # the old user's Idempotency-Key names nothing of the new user's
    assert retried["job_id"] != job and retried["replayed"] == "false"
    _delete_user(state, name, again_keys.access_key)


def test_the_developer_identity_is_keyed_on_its_unique_id_and_local_env_exports_its_own_secret(
    stack: LocalStack,
) -> None:
    state = stack.state()
    developer = developer_door(state)
    user_id = aws(state, "iam").get_user(UserName=state["developer"]["user"])["User"]["UserId"]
    assert AWS_USER_ID.match(user_id) and state["developer"]["user_id"] == user_id
    assert _secret(developer) == stack.outputs["OMNIREEL_WEBHOOK_SECRET"]
    job = _submit(developer, f"developer-{uuid.uuid4().hex}")["job_id"]
    assert _record(state, job)["owner"] == user_id


def test_a_session_of_a_deleted_role_is_refused_and_the_re_created_role_is_a_new_caller(stack: LocalStack) -> None:
    state = stack.state()
    iam = aws(state, "iam")
    role_arn = new_role(state)
    role_name = role_arn.rsplit("/", 1)[1]
    old_session = _door(state, session_of(state, role_arn, "replica-1"))
    job = _submit(old_session, f"role-{uuid.uuid4().hex}")["job_id"]
    trust = iam.get_role(RoleName=role_name)["Role"]["AssumeRolePolicyDocument"]
    old_id = iam.get_role(RoleName=role_name)["Role"]["RoleId"]
    assert AWS_ROLE_ID.match(old_id), old_id

    iam.delete_role_policy(RoleName=role_name, PolicyName="invoke")
    iam.delete_role(RoleName=role_name)
    iam.create_role(RoleName=role_name, Path="/apps/", AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName=role_name, PolicyName="invoke", PolicyDocument=invoke_policy(state))
    assert iam.get_role(RoleName=role_name)["Role"]["RoleId"] != old_id

    refused = old_session.get_job(job)  # the session's role id names no role any more
    assert refused.status == 403 and "is not authorized to perform: execute-api:Invoke" in refused.json["message"]
    new_session = _door(state, session_of(state, role_arn, "replica-1"))  # same role name, same session name
    assert new_session.get_job(job).status == 404 and job not in _listed(new_session)


def test_by_default_two_sessions_of_one_role_share_jobs_and_the_webhook_secret(stack: LocalStack) -> None:
    """CallerScope=role (the default): one app's replicas are one caller (docs/callers.md)."""
    state = stack.state()
    role_arn = new_role(state)
    alice = _door(state, session_of(state, role_arn, "alice"))
    bob = _door(state, session_of(state, role_arn, "bob"))
    job = _submit(alice, f"shared-{uuid.uuid4().hex}")["job_id"]
    assert bob.get_job(job).status == 200 and job in _listed(bob)
    assert _secret(alice) == _secret(bob)


# ---------------------------------------------------------------- CallerScope=session
@pytest.fixture
def per_session(stack: LocalStack) -> Iterator[LocalStack]:
    """The shared stack with CallerScope=session: the parameter only reaches functions' environments (CALLER_SCOPE),
    so it is set there at run time, as an operator's redeploy would, and put back after the test."""
    with reconfigured(stack, {"CALLER_SCOPE": "session"}):
        yield stack


def test_with_caller_scope_session_two_sessions_of_one_role_are_two_callers(per_session: LocalStack) -> None:
    state = per_session.state()
    role_arn = new_role(state)
    alice = _door(state, session_of(state, role_arn, "alice"))
    bob = _door(state, session_of(state, role_arn, "bob"))
    key = f"person-{uuid.uuid4().hex}"

    hers = _submit(alice, key)["job_id"]
    assert alice.get_job(hers).status == 200 and hers in _listed(alice)
    seen = bob.get_job(hers)
    assert seen.status == 404 and seen.json["error"]["code"] == "JobNotFound", seen.body
    assert _listed(bob) == set()
    his = _submit(bob, key)  # one Idempotency-Key, two people: two jobs
    assert his["job_id"] != hers and his["replayed"] == "false"
    assert _secret(alice) != _secret(bob)

    again = _door(state, session_of(state, role_arn, "alice"))  # a new session under the same name is the same person
    assert again.get_job(hers).status == 200 and _secret(again) == _secret(alice)
    record = _record(state, hers)
    assert record["owner"].endswith(":alice") and AWS_ROLE_ID.match(record["owner"].split(":")[0]), record["owner"]
    assert record["owner_arn"].endswith(":assumed-role/" + role_arn.rsplit("/", 1)[1] + "/alice")
