"""Raw HTTP requests to the local stack's front door, SigV4-signed like an app's SDK signs them (or deliberately not).

``http.client`` rather than a higher-level client: the tests need repeated headers, bad framing and unsigned
requests, which friendlier clients normalise away.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from omnireel.events.event_types import TERMINAL_EVENT_TYPES
from omnireel_local import home as homedir
from tests.support import local_clients

TIMEOUT_S = 35.0


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


@dataclass
class FrontDoorClient:
    api_url: str
    region: str
    credentials: Credentials | None = None  # None: unsigned
    seen: list[str] = field(default_factory=list)

    def as_(self, credentials: Credentials | None) -> FrontDoorClient:
        return FrontDoorClient(self.api_url, self.region, credentials)

    def signed(self, method: str, path: str, body: bytes, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``headers`` (repeats kept) plus the SigV4 headers for service execute-api."""
        if self.credentials is None:
            return list(headers)
        request = AWSRequest(method=method, url=self.api_url + path, data=body)
        for name, value in headers:
            request.headers[name] = value  # HTTPHeaders keeps repeated names; SigV4 signs them joined with ","
        SigV4Auth(self.credentials, "execute-api", self.region).add_auth(request)
        return list(request.headers.items())

    def request(self, method: str, path: str, body: bytes = b"", headers: list[tuple[str, str]] | None = None,
                timeout: float = TIMEOUT_S) -> Reply:  # fmt: skip
        headers = list(headers or [("Content-Type", "application/json")])
        return self.send(method, path, body, self.signed(method, path, body, headers), timeout=timeout)

    def post_json(self, value: Any, *extra: tuple[str, str]) -> Reply:
        body = json.dumps(value).encode()
        return self.request("POST", "/jobs", body, [("Content-Type", "application/json"), *extra])

    def get_job(self, job_id: str) -> Reply:
        return self.request("GET", f"/jobs/{job_id}", b"", [])

    def send(self, method: str, path: str, body: bytes, headers: list[tuple[str, str]], *,
             content_length: str | None = None, timeout: float = TIMEOUT_S) -> Reply:  # fmt: skip
        """One request on a fresh connection; ``content_length`` overrides the announced length."""
        where = urlsplit(self.api_url)
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=timeout)
        try:
            connection.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value.encode())  # UTF-8 on the wire, as clients send non-ASCII values
            connection.putheader("Content-Length", content_length if content_length is not None else str(len(body)))
            connection.endheaders()
            if body:
                connection.send(body)
            response = connection.getresponse()
            return Reply(response.status, response.getheaders(), response.read())
        finally:
            connection.close()

    def send_raw(self, method: str, path: str, headers: list[tuple[str, str]], raw_body: bytes,
                 timeout: float = TIMEOUT_S) -> Reply:  # fmt: skip
        """Headers as given (no Content-Length added) and ``raw_body`` as bytes on the wire (e.g. chunked framing)."""
        where = urlsplit(self.api_url)
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=timeout)
        try:
            connection.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders()
            connection.send(raw_body)
            response = connection.getresponse()
            return Reply(response.status, response.getheaders(), response.read())
        finally:
            connection.close()


def aws(state: dict[str, Any], service: str) -> Any:
    """The process's client of the local AWS with the local developer's credentials (tests/support/local_clients.py)."""
    keys = homedir.developer_credentials(state)
    return local_clients.client(
        service, state["endpoint_url"], state["region"], keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"]
    )


def developer_door(state: dict[str, Any]) -> FrontDoorClient:
    """The front door signing as the local developer (the CLI's identity): what the CLI asks, asked in-process (no
    process to start per request, e.g. in a wait loop)."""
    keys = homedir.developer_credentials(state)
    credentials = Credentials(keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"])
    return FrontDoorClient(state["api_url"], state["region"], credentials)


def invoke_policy(state: dict[str, Any]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:*:*:*/*/*/*"}
            ],
        }
    )


def new_user(state: dict[str, Any], *, may_invoke: bool = True) -> tuple[str, Credentials]:
    """An IAM user of the local AWS with an access key (and, unless told otherwise, execute-api:Invoke)."""
    iam = aws(state, "iam")
    name = f"{homedir.STACK_NAME}-scratch-fd-user-{uuid.uuid4().hex[:10]}"  # the developer's scratch principals
    arn = iam.create_user(UserName=name)["User"]["Arn"]
    if may_invoke:
        iam.put_user_policy(UserName=name, PolicyName="invoke", PolicyDocument=invoke_policy(state))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return arn, Credentials(key["AccessKeyId"], key["SecretAccessKey"])


def new_role(state: dict[str, Any]) -> str:
    iam = aws(state, "iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    name = f"{homedir.STACK_NAME}-scratch-fd-app-{uuid.uuid4().hex[:10]}"
    arn = iam.create_role(RoleName=name, Path="/apps/", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="invoke", PolicyDocument=invoke_policy(state))
    return arn


def session_of(state: dict[str, Any], role_arn: str, session_name: str) -> Credentials:
    found = aws(state, "sts").assume_role(RoleArn=role_arn, RoleSessionName=session_name)["Credentials"]
    return Credentials(found["AccessKeyId"], found["SecretAccessKey"], found["SessionToken"])


def executions(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The executions of jobs submitted through the API (``POST /jobs``, the door's own requests). The e2e and the
    integration tests share one stack per worker, so a test that ran before may still start executions in the
    background (a dropped file waiting for its caller's limit, a batch's next lines): those are not the door's."""
    sfn = aws(state, "stepfunctions")
    arn = state["outputs"]["StateMachineArn"]
    found: list[dict[str, Any]] = []
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=arn):
        found += page["executions"]
    return [e for e in found if _submitted_alone(state, sfn, e["executionArn"])]


_ALONE: dict[str, bool] = {}  # execution arn -> its job was one POST /jobs (a job's origin never changes)


def _submitted_alone(state: dict[str, Any], sfn: Any, execution_arn: str) -> bool:
    """Was the execution's job submitted by one ``POST /jobs`` (source ``api``, no batch)? A dropped file's job has an
    ``s3://`` source, a batch line's job its batch. A record that cannot be read counts as the door's: when in doubt,
    a check of "no job started" stays strict."""
    if execution_arn not in _ALONE:
        job_id = json.loads(sfn.describe_execution(executionArn=execution_arn).get("input") or "{}").get("job_id")
        table = state["provisioned"]["resources"]["JobsTable"]["id"]
        item = aws(state, "dynamodb").get_item(TableName=table, Key={"job_id": {"S": str(job_id)}}).get("Item")
        if item is None:
            return True  # not cached: the record may not be written yet
        _ALONE[execution_arn] = item.get("source", {}).get("S") == "api" and "batch" not in item
    return _ALONE[execution_arn]


def event_for(state: dict[str, Any], job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """The job's event from the stack's job-events queue (SNS -> SQS), waiting for it (bounded)."""
    sqs = aws(state, "sqs")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        wait = max(1, min(5, int(deadline - time.monotonic())))
        found = sqs.receive_message(QueueUrl=state["events_queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=wait)
        for message in found.get("Messages", []):
            envelope = json.loads(message["Body"])
            event = json.loads(envelope["Message"]) if "Message" in envelope else envelope
            if event.get("job_id") == job_id and event.get("event_type") in TERMINAL_EVENT_TYPES:
                return event
    raise AssertionError(f"no event for job {job_id} within {timeout} s")
