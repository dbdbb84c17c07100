"""The local AWS's endpoint keeps connections open (omnireel_local.aws_server): one connection serves a client's calls,
as AWS's endpoints do, and nothing of one request leaks into the next.

moto's werkzeug server answered every request ``Connection: close``: a new connection, and a new server thread, per
AWS call. Checked on the server's accepted connections and on the wire, not by timing."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from omnireel_local.aws_server import AwsServer, KeepAliveHandler

LIST_TABLES = {  # moto routes by the credential scope's service
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20261205/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host, Signature=" + "0" * 64,
}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[AwsServer, list[Any]]]:
    accepted: list[Any] = []
    setup = KeepAliveHandler.setup

    def counted(self: Any) -> None:
        setup(self)
        accepted.append(self.connection)

    monkeypatch.setattr(KeepAliveHandler, "setup", counted)
    aws = AwsServer("127.0.0.1", 0)
    aws.start()
    try:
        yield aws, accepted
    finally:
        aws.stop()


def _client(aws: AwsServer, service: str) -> Any:
    host, port = aws.get_host_and_port()
    return boto3.client(
        service,
        endpoint_url=f"http://{host}:{port}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
    )


def _raw(aws: AwsServer) -> http.client.HTTPConnection:
    host, port = aws.get_host_and_port()
    return http.client.HTTPConnection(host, port, timeout=10)


def test_a_client_s_calls_share_one_connection(server: tuple[AwsServer, list[Any]]) -> None:
    aws, accepted = server
    s3 = _client(aws, "s3")
    s3.create_bucket(Bucket="bucket-one")
    for n in range(10):
        s3.put_object(Bucket="bucket-one", Key=f"k{n}", Body=b"x" * n)
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="bucket-one")["Contents"]) == [f"k{n}" for n in range(10)]
    assert len(accepted) == 1, f"{len(accepted)} connections for 12 calls"


def test_large_bodies_head_and_missing_keys_on_one_connection(server: tuple[AwsServer, list[Any]]) -> None:
    """A 7 MB upload (botocore sends ``Expect: 100-continue``), a HEAD keeping the object's length without a body, an
    error answer, and the calls after each on the same connection."""
    aws, accepted = server
    s3 = _client(aws, "s3")
    s3.create_bucket(Bucket="bucket-one")
    big = bytes(range(256)) * (7 * 4096)
    s3.put_object(Bucket="bucket-one", Key="big", Body=big)
    assert s3.head_object(Bucket="bucket-one", Key="big")["ContentLength"] == len(big)
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="bucket-one", Key="missing")
    assert s3.get_object(Bucket="bucket-one", Key="big")["Body"].read() == big
    assert len(accepted) == 1


def test_a_body_the_application_ignores_does_not_reach_the_next_request(server: tuple[AwsServer, list[Any]]) -> None:
    aws, accepted = server
    connection = _raw(aws)
    stray = b"GET /moto-api/ HTTP/1.1\r\nHost: x\r\n\r\n"  # looks like a request: it must be read as this body
    connection.request("GET", "/moto-api/reset-auth", body=stray, headers={"Content-Length": str(len(stray))})
    first = connection.getresponse()
    first.read()
    connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
    second = connection.getresponse()
    assert second.status == 200 and b"TableNames" in second.read()
    assert second.getheader("Connection") is None  # still open
    assert len(accepted) == 1


def test_a_client_asking_to_close_and_a_chunked_body_close_after_the_answer(
    server: tuple[AwsServer, list[Any]],
) -> None:
    aws, _ = server
    for headers, body in (
        ({"Connection": "close", "Content-Length": "0"}, None),
        ({"Transfer-Encoding": "chunked"}, iter([b"{}"])),
    ):
        connection = _raw(aws)
        connection.request("POST", "/", body=body, headers={**LIST_TABLES, **headers}, encode_chunked=body is not None)
        answer = connection.getresponse()
        assert answer.status == 200 and b"TableNames" in answer.read()
        assert answer.getheader("Connection") == "close"
        assert connection.sock is None or connection.sock.recv(1) == b""  # the server closed its side


def test_an_application_error_answers_500_and_closes(server: tuple[AwsServer, list[Any]]) -> None:
    aws, _ = server

    def broken(environ: Any, start_response: Any) -> Any:
        raise RuntimeError("boom")

    assert aws._server is not None
    aws._server.app = broken
    connection = _raw(aws)
    connection.request("GET", "/")
    answer = connection.getresponse()
    assert answer.status == 500 and answer.read() == b"Internal Server Error"
    assert answer.getheader("Connection") == "close"


def test_an_idle_connection_is_closed_after_the_idle_timeout(
    server: tuple[AwsServer, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that connects and sends nothing does not hold its server thread for ever (bounded by the timeout)."""
    aws, _ = server
    monkeypatch.setattr(KeepAliveHandler, "timeout", 0.2)
    host, port = aws.get_host_and_port()
    with socket.create_connection((host, port), timeout=10) as idle:
        assert idle.recv(1) == b""  # closed by the server, well before this socket's own 10 s timeout
