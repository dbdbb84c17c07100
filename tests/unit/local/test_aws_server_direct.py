"""The local AWS answers through ``ServiceApp`` (omnireel_local.aws_server) without Flask's per-request machinery, and
its answers are Flask's: the same calls of each protocol the stack serves (JSON: DynamoDB, SQS, Lambda's REST; query:
SNS; REST-XML: S3, its HEAD and its errors), made once through Flask and once directly on a fresh local AWS each,
give the same status, the same headers (flask_cors's included) and the same bodies, apart from what moto makes anew
for every call (request ids, dates, random handles)."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from omnireel_local import aws_server
from omnireel_local.aws_server import AwsServer, ServiceApp

# What moto makes anew for every call: compared by presence, not value.
VOLATILE_HEADERS = {"date", "x-amzn-requestid", "x-amz-request-id", "x-amz-id-2", "x-amz-crc32", "last-modified"}
_VOLATILE_TEXT = [
    re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I),  # request and message ids
    re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"),  # ISO times
    re.compile(rb"\d{10}(\.\d+)?"),  # epoch times
    re.compile(rb'"ReceiptHandle":\s*"[^"]*"'),
    re.compile(rb"<(RequestId|HostId)>[^<]*</\1>"),
]


def _masked(body: bytes) -> bytes:
    for pattern in _VOLATILE_TEXT:
        body = pattern.sub(b"~", body)
    return body


def _scenario(endpoint: str, calls: list[tuple[str, int, dict[str, str], bytes]]) -> None:
    """The same calls on every run; each answer's status, headers and body are appended to ``calls``."""

    def client(service: str) -> Any:
        made = boto3.client(
            service,
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
        )

        def seen(http_response: Any, model: Any, **_: Any) -> None:
            # A streamed body (GetObject's) is read by the caller, compared there.
            body = b"(streamed)" if model.has_streaming_output else http_response.content
            calls.append((model.name, http_response.status_code, dict(http_response.headers), body))

        made.meta.events.register("after-call", seen)
        return made

    def failing(call: Callable[[], Any]) -> None:
        with pytest.raises(Exception) as raised:
            call()
        assert "Error" in getattr(raised.value, "response", {}), raised.value

    ddb = client("dynamodb")
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    ddb.update_item(
        TableName="t",
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET n = n + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )
    ddb.get_item(TableName="t", Key={"pk": {"S": "a"}}, ConsistentRead=True)
    ddb.query(TableName="t", KeyConditionExpression="pk = :a", ExpressionAttributeValues={":a": {"S": "a"}})
    exists = "attribute_exists(pk)"
    failing(lambda: ddb.put_item(TableName="t", Item={"pk": {"S": "a"}}, ConditionExpression=f"{exists} AND n = :z",
                                 ExpressionAttributeValues={":z": {"N": "0"}}))  # fmt: skip
    failing(lambda: ddb.get_item(TableName="missing", Key={"pk": {"S": "a"}}))

    s3 = client("s3")
    s3.create_bucket(Bucket="bucket-one")
    s3.put_object(Bucket="bucket-one", Key="k", Body=b"body", ContentType="text/plain", Metadata={"my_key": "v"})
    s3.head_object(Bucket="bucket-one", Key="k")
    assert s3.get_object(Bucket="bucket-one", Key="k")["Body"].read() == b"body"
    s3.list_objects_v2(Bucket="bucket-one")
    failing(lambda: s3.get_object(Bucket="bucket-one", Key="missing"))
    failing(lambda: s3.head_object(Bucket="bucket-one", Key="missing"))

    sqs = client("sqs")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    failing(lambda: sqs.get_queue_url(QueueName="missing"))

    sns = client("sns")
    sns.create_topic(Name="topic")
    sns.list_topics()

    lambda_ = client("lambda")
    lambda_.list_functions()
    failing(lambda: lambda_.get_function(FunctionName="missing"))


def _raw_calls(endpoint: str, calls: list[tuple[str, int, dict[str, str], bytes]]) -> None:
    """Requests no SDK sends: a path no rule matches, and a browser's (``Origin``; a preflight)."""
    host, port = endpoint.removeprefix("http://").split(":")
    for method, path, headers in (
        ("GET", "/no/such/route/at/all", {"Authorization": _scope("lambda")}),
        ("GET", "/bucket-one/k", {"Authorization": _scope("s3"), "Origin": "http://127.0.0.1:8000"}),
        ("OPTIONS", "/bucket-one/k", {"Origin": "http://127.0.0.1:8000", "Access-Control-Request-Method": "GET"}),
    ):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request(method, path, headers=headers)
        answer = connection.getresponse()
        calls.append((f"{method} {path}", answer.status, dict(answer.getheaders()), answer.read()))
        connection.close()


def _scope(service: str) -> str:
    return (
        f"AWS4-HMAC-SHA256 Credential=testing/20261205/us-east-1/{service}/aws4_request, SignedHeaders=host, "
        f"Signature={'0' * 64}"
    )


@pytest.fixture
def local_aws() -> Iterator[Callable[[], str]]:
    servers: list[AwsServer] = []

    def start() -> str:
        aws = AwsServer("127.0.0.1", 0)
        aws.start()
        servers.append(aws)
        host, port = aws.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        reset = http.client.HTTPConnection(host, port, timeout=10)
        reset.request("POST", "/moto-api/reset")
        assert reset.getresponse().status == 200
        return endpoint

    try:
        yield start
    finally:
        for aws in servers:
            aws.stop()


def _run(start: Callable[[], str]) -> list[tuple[str, int, dict[str, str], bytes]]:
    calls: list[tuple[str, int, dict[str, str], bytes]] = []
    endpoint = start()
    _scenario(endpoint, calls)
    _raw_calls(endpoint, calls)
    here = endpoint.removeprefix("http://")  # each run's server has its own port
    return [
        (name, status, {k: v.replace(here, "~") for k, v in headers.items()}, body.replace(here.encode(), b"~"))
        for name, status, headers, body in calls
    ]


def test_every_answer_is_the_one_flask_gives(local_aws: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> None:
    direct = _run(local_aws)
    with monkeypatch.context() as through_flask:
        through_flask.setattr(ServiceApp, "__call__", lambda self, environ, sr: self.flask_app(environ, sr))
        flask = _run(local_aws)
    assert [c[0] for c in direct] == [c[0] for c in flask]
    for (name, status, headers, body), (_, flask_status, flask_headers, flask_body) in zip(direct, flask, strict=True):
        assert status == flask_status, name
        lowered = {k.lower(): v for k, v in headers.items()}
        flask_lowered = {k.lower(): v for k, v in flask_headers.items()}
        assert lowered.keys() == flask_lowered.keys(), name
        for header in lowered.keys() - VOLATILE_HEADERS:
            if header == "content-length" and lowered.get("content-type", "").startswith(("application/x-amz-json",)):
                continue  # the masked body's length (a timestamp's digits) may differ
            assert lowered[header] == flask_lowered[header], (name, header)
        assert _masked(body) == _masked(flask_body), name
    assert any(h.get("Access-Control-Allow-Origin") == "*" for _, _, h, _ in direct)  # flask_cors's, kept


def test_the_direct_path_serves_the_calls_flask_answered_before(
    local_aws: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison above compares something: SDK calls go the direct way, browsers' and unmatched ones to Flask."""
    to_flask: list[str] = []
    original = ServiceApp.__call__

    def counted(self: ServiceApp, environ: dict[str, Any], start_response: Any) -> Any:
        flask_app = self.flask_app
        self.flask_app = _Counting(flask_app, to_flask)  # type: ignore[assignment]
        try:
            return original(self, environ, start_response)
        finally:
            self.flask_app = flask_app

    monkeypatch.setattr(ServiceApp, "__call__", counted)
    calls = _run(local_aws)
    assert len(calls) > 20
    assert to_flask == ["GET /no/such/route/at/all", "GET /bucket-one/k", "OPTIONS /bucket-one/k"]
    assert aws_server._CORS_WITHOUT_ORIGIN  # the header the direct path adds, compared above
    assert json.loads(next(c[3] for c in calls if c[0] == "GetItem"))["Item"]["n"] == {"N": "2"}


class _Counting:
    def __init__(self, app: Any, seen: list[str]):
        self._app, self._seen = app, seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self._seen.append(f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}")
        return self._app(environ, start_response)
