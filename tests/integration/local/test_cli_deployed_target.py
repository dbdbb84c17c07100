"""`--stack NAME`: outputs come from CloudFormation, API calls are SigV4-signed for execute-api."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from moto import mock_aws

from omnireel_cli.errors import EXIT_INFRA, CliError
from omnireel_cli.main import main
from omnireel_cli.target import Target

TEMPLATE = {
    "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
    "Outputs": {
        "ApiUrl": {"Value": "http://127.0.0.1:1"},
        "InboxBucketName": {"Value": "inbox"},
        "JobEventsTopicArn": {"Value": {"Ref": "Topic"}},
    },
}


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Recorder.seen.append({"path": self.path, "headers": dict(self.headers.items()), "body": json.loads(body)})
        payload = json.dumps({"job_id": "j-1", "status": "accepted", "status_url": "/jobs/j-1"}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@mock_aws
def test_deployed_target_reads_outputs_and_signs_api_calls(api_server: str) -> None:
    boto3.client("cloudformation", region_name="eu-west-1").create_stack(
        StackName="prod", TemplateBody=json.dumps(TEMPLATE)
    )
    target = Target.deployed("prod", "eu-west-1")
    assert target.outputs["InboxBucketName"] == "inbox"
    assert target.outputs["JobEventsTopicArn"].startswith("arn:aws:sns:eu-west-1:")
    assert target.sign and not target.local
    target.api_url = api_server
    job = target.api_client.submit("x")  # the CLI calls the API through the client (omnireel_client)
    assert (job.job_id, job.status) == ("j-1", "accepted")
    request = _Recorder.seen[-1]
    assert request["body"] == {"prompt": "x"} and request["headers"]["Idempotency-Key"] == job.idempotency_key
    auth = request["headers"]["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=")
    assert "/eu-west-1/execute-api/aws4_request" in auth
    assert "X-Amz-Date" in request["headers"]


@mock_aws
def test_unknown_stack_is_an_infrastructure_error() -> None:
    with pytest.raises(CliError) as info:
        Target.deployed("missing", "eu-west-1")
    assert info.value.code == EXIT_INFRA
    assert main(["status", "00000000-0000-0000-0000-000000000000", "--stack", "missing", "--region", "eu-west-1"]) == 3
