"""Issue 33 item 11: ``omnireel ui``'s server (``cli/omnireel_cli/ui.py``) against a scripted API on loopback. A request
with a page token that is not ASCII, or a job whose body has a key named ``self``, gets a clear 4xx (an unhandled
exception dropped the connection); an allowed request's connection carries the next one. The whole page in a browser
against the local stack is tests/e2e/test_ui.py."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from omnireel_cli.target import Target
from omnireel_cli.ui import UiServer
from omnireel_client import Client

from .conftest import ACCEPTED, CREDENTIALS, Script

JOB_ID = "00000000-0000-4000-8000-000000000001"


@pytest.fixture
def ui(api: tuple[str, Script]) -> Iterator[tuple[UiServer, Script]]:
    url, script = api
    keys = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}
    target = Target(name="stub", api_url=url, region="eu-west-1", outputs={}, credentials=keys, sign=True)
    server = UiServer(target, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server, script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _ask(connection: http.client.HTTPConnection, method: str, path: str, headers: dict[str, Any],
         body: bytes | None = None) -> tuple[int, Any]:  # fmt: skip
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    return response.status, json.loads(data) if data else None


def _connect(server: UiServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)


def test_a_page_token_that_is_not_ascii_is_a_403_not_a_dropped_connection(ui) -> None:
    server, script = ui
    script.answers = [(200, {"jobs": [], "next_cursor": None}, {}, 0)]
    host = {"Host": f"127.0.0.1:{server.port}"}
    connection = _connect(server)
    try:
        for token in ("🎬".encode(), "jeton-é".encode("latin-1"), ("é" + server.token[1:]).encode()):
            status, body = _ask(connection, "GET", "/api/info", {**host, "X-Omnireel-Ui": token})
            assert status == 403 and body["error"]["code"] == "Forbidden"
            connection.close()  # a refused request closes its connection (its body, if any, was not read)
            status, _ = _ask(connection, "GET", "/api/info", {**host, "X-Omnireel-Ui": server.token})
            assert status == 200
        status, body = _ask(connection, "GET", f"/media/{JOB_ID}/video?t=%C3%A9t%C3%A9", host)
        assert status == 403
    finally:
        connection.close()
    assert script.seen == []  # nothing refused reached the API


def test_a_job_body_with_a_key_named_self_gets_the_apis_refusal(ui) -> None:
    server, script = ui
    refusal = {"error": {"code": "InvalidRequest", "message": "1 problem",
                         "problems": [{"field": "self", "message": "unknown field"}]}}  # fmt: skip
    script.answers = [(400, refusal, {}, 0)]
    headers = {"Host": f"127.0.0.1:{server.port}", "X-Omnireel-Ui": server.token, "Content-Type": "application/json"}
    connection = _connect(server)
    try:
        body = json.dumps({"prompt": "a kite", "self": 1, "video": {"num_frames": 17}}).encode()
        status, answer = _ask(connection, "POST", "/api/jobs", headers, body)
        assert status == 400 and answer["error"]["problems"] == [{"field": "self", "message": "unknown field"}]
        assert json.loads(script.seen[-1]["body"]) == {"prompt": "a kite", "self": 1, "video": {"num_frames": 17}}
        for wrong, said in [
            ({"prompt": "p", "idempotency_key": 5}, "idempotency_key: a text is required"),
            ({"prompt": "p", "webhook": ["x"]}, "webhook: a text is required"),
        ]:
            status, answer = _ask(connection, "POST", "/api/jobs", headers, json.dumps(wrong).encode())
            assert status == 400 and answer["error"]["message"] == said
        status, answer = _ask(connection, "POST", "/api/jobs", headers, b"[" * 100_000)
        assert status == 400 and "nested too deeply" in answer["error"]["message"]
    finally:
        connection.close()
    assert len(script.seen) == 1


def test_a_limit_that_is_not_ascii_digits_is_the_default(ui) -> None:
    server, script = ui
    script.answers = [(200, {"jobs": [], "next_cursor": None}, {}, 0)]
    headers = {"Host": f"127.0.0.1:{server.port}", "X-Omnireel-Ui": server.token}
    connection = _connect(server)
    try:
        status, _ = _ask(connection, "GET", "/api/jobs?limit=%C2%B2", headers)  # "²".isdigit() is True
    finally:
        connection.close()
    assert status == 200 and script.seen[-1]["path"] == "/jobs?limit=20"


def test_the_client_sends_a_field_named_self_and_still_takes_prompt_by_name(api) -> None:
    """What the page's server relies on: ``submit(prompt, **fields)`` with any field name (the CLI passes
    ``prompt=`` by name)."""
    url, script = api
    script.answers = [(202, ACCEPTED, {}, 0)]
    client = Client(url, "eu-west-1", CREDENTIALS)
    client.submit("a kite", **{"self": 1, "seed": 3})
    client.submit(prompt="a boat", seed=4)
    assert [json.loads(seen["body"]) for seen in script.seen] == [
        {"prompt": "a kite", "self": 1, "seed": 3},
        {"prompt": "a boat", "seed": 4},
    ]


@pytest.mark.parametrize(
    ("status", "code"), [(403, "Forbidden"), (429, "Throttled"), (404, "NotFound"), (400, "InvalidRequest")]
)
def test_a_refused_media_request_says_the_apis_own_status_and_code(ui, status: int, code: str) -> None:
    """Issue 37 item 4: the page's /media answered every refusal of the API as NotFound."""
    server, script = ui
    script.answers = [(status, {"error": {"code": code, "message": f"the API says {code}"}}, {}, 0)]
    connection = _connect(server)
    try:
        got, body = _ask(connection, "GET", f"/media/{JOB_ID}/image?t={server.token}",
                         {"Host": f"127.0.0.1:{server.port}"})  # fmt: skip
    finally:
        connection.close()
    assert got == status and body["error"]["code"] == code
    assert body["error"]["message"] == f"the API says {code}"
