"""Defect 11: `omnireel submit` retries POST /jobs when a response is lost; with its Idempotency-Key the retry is the
same job. A proxy in front of the local front door forwards the first POST (the job is created) and then drops the
connection instead of answering, as a timeout or a reset on the way back would."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from omnireel.jobs.job import job_id_of_execution
from omnireel_cli import jobs
from omnireel_cli.target import Target
from tests.support.frontdoor import executions
from tests.support.stack import LocalStack


class _DropFirstAnswer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str):
        self.upstream = urlsplit(upstream)
        self.forwarded: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Forward)


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _DropFirstAnswer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=30)
        try:
            upstream.putrequest("POST", self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():  # Host included: the signature covers it
                upstream.putheader(name, value)
            upstream.endheaders(body)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        self.server.forwarded.append({"headers": dict(self.headers.items()), "status": response.status})
        if len(self.server.forwarded) == 1:
            self.close_connection = True  # the job exists upstream, but its answer never reaches the client
            return
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("connection", "transfer-encoding"):
                self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def lossy_api(stack: LocalStack) -> Iterator[_DropFirstAnswer]:
    proxy = _DropFirstAnswer(stack.state()["api_url"])
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_a_retried_submit_after_a_lost_answer_is_one_job(
    stack: LocalStack, door_state: dict[str, Any], lossy_api: _DropFirstAnswer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIREEL_HOME", str(stack.home))
    target = Target.local_stack()
    target.api_url = f"http://127.0.0.1:{lossy_api.server_address[1]}"
    before = {e["name"] for e in executions(door_state)}

    accepted = jobs.submit(target, {"prompt": "a fox that must be made once"})

    assert [f["status"] for f in lossy_api.forwarded] == [202, 202], "the CLI retried once after the lost answer"
    keys = [f["headers"].get("Idempotency-Key") for f in lossy_api.forwarded]
    assert keys[0] and keys[0] == keys[1] == accepted.idempotency_key
    started = [e["name"] for e in executions(door_state) if e["name"] not in before]
    # Each job record names its own execution (job id + suffix): one submit, one record, one execution.
    assert [job_id_of_execution(name) for name in started] == [accepted.job_id], "one submit, one job"


def test_submit_prints_its_key_and_honours_a_given_one(stack: LocalStack) -> None:
    generated = json.loads(stack.cli("submit", "a keyed fox", "--json", check=True).stdout)
    assert generated["idempotency_key"].startswith("cli-")
    args = ("submit", "a keyed fox", "--json", "--idempotency-key", "my-key-1")
    given = [json.loads(stack.cli(*args, check=True).stdout) for _ in range(2)]
    assert [g["idempotency_key"] for g in given] == ["my-key-1", "my-key-1"]
    assert given[0]["job_id"] == given[1]["job_id"] != generated["job_id"]
