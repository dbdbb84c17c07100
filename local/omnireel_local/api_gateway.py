"""The local front door: HTTP requests -> API Gateway HTTP API (payload format 2.0) proxy events -> Lambda Invoke.

Routes come from the HTTP API's OpenAPI body in the transformed template (``Provisioned.routes``), so a route added to
template.yaml is served here without code changes. The function is invoked through the local Lambda Invoke API (the
same path API Gateway uses), and its ``{statusCode, headers, body, isBase64Encoded, cookies}`` answer becomes the
HTTP response. IAM auth: requests are not signature-checked locally; the caller is reported in
``requestContext.authorizer.iam`` as the access key of a SigV4 ``Authorization`` header, or the local user.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
from botocore.config import Config

from .provision import Route

log = logging.getLogger("omnireel_local.api")

INTEGRATION_TIMEOUT_S = 30  # API Gateway's maximum integration timeout for HTTP APIs
_TEXT = re.compile(r"^(text/|application/(json|xml|x-www-form-urlencoded|javascript))")


def _compile(path: str) -> re.Pattern[str]:
    pattern = ""
    for part in re.split(r"(\{[^}]+\})", path):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            pattern += f"(?P<{name.rstrip('+')}>.+)" if name.endswith("+") else f"(?P<{name}>[^/]+)"
        else:
            pattern += re.escape(part)
    return re.compile(f"^{pattern}$")


class _FrontDoorServer(ThreadingHTTPServer):
    # socketserver's default listen backlog (5) resets bursts of concurrent clients.
    request_queue_size = 128


class FrontDoor:
    def __init__(self, routes: list[Route], moto_endpoint: str, region: str, account_id: str, api_id: str = "local",
                 credentials: dict[str, str] | None = None):  # fmt: skip
        """``credentials``: boto3 keyword arguments of the identity that invokes Lambda as API Gateway does."""
        self.routes = [(route, _compile(route.path)) for route in routes]
        self.region = region
        self.account_id = account_id
        self.api_id = api_id
        self._lambda = boto3.client(
            "lambda",
            endpoint_url=moto_endpoint,
            region_name=region,
            **(credentials or {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}),
            config=Config(read_timeout=INTEGRATION_TIMEOUT_S + 5, retries={"max_attempts": 1}),
        )
        self._server: ThreadingHTTPServer | None = None

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route, pattern in self.routes:
            found = pattern.match(path)
            if found and route.method in (method, "ANY"):
                return route, found.groupdict()
        return None

    def event(self, method: str, target: str, headers: dict[str, str], body: bytes, route: Route,
              params: dict[str, str], source_ip: str) -> dict[str, Any]:  # fmt: skip
        split = urlsplit(target)
        lowered: dict[str, str] = {}
        for key, value in headers.items():
            key = key.lower()
            lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
        content_type = lowered.get("content-type", "")
        is_text = not body or bool(_TEXT.match(content_type))
        now = datetime.now(UTC)
        access_key = "LOCAL"
        if match := re.search(r"Credential=([^/]+)/", lowered.get("authorization", "")):
            access_key = match[1]
        query = parse_qsl(split.query, keep_blank_values=True)
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": f"{route.method} {route.path}",
            "rawPath": split.path,
            "rawQueryString": split.query,
            "headers": lowered,
            "requestContext": {
                "accountId": self.account_id,
                "apiId": self.api_id,
                "domainName": lowered.get("host", "localhost"),
                "domainPrefix": lowered.get("host", "localhost").split(".")[0],
                "http": {
                    "method": method,
                    "path": split.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": source_ip,
                    "userAgent": lowered.get("user-agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": f"{route.method} {route.path}",
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "isBase64Encoded": not is_text,
        }
        if route.authorization == "AWS_IAM":
            event["requestContext"]["authorizer"] = {
                "iam": {
                    "accessKey": access_key,
                    "accountId": self.account_id,
                    "callerId": access_key,
                    "cognitoIdentity": None,
                    "principalOrgId": None,
                    "userArn": f"arn:aws:iam::{self.account_id}:user/omnireel-local",
                    "userId": access_key,
                }
            }
        if query:
            merged: dict[str, str] = {}
            for key, value in query:
                merged[key] = f"{merged[key]},{value}" if key in merged else value
            event["queryStringParameters"] = merged
        if params:
            event["pathParameters"] = params
        if "cookie" in lowered:
            event["cookies"] = [c.strip() for c in lowered["cookie"].split(";")]
        if body:
            event["body"] = body.decode("utf-8") if is_text else base64.b64encode(body).decode()
        return event

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str
               ) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        path = urlsplit(target).path
        matched = self.match(method, path)
        if matched is None:
            return 404, {"Content-Type": "application/json"}, b'{"message":"Not Found"}'
        route, params = matched
        event = self.event(method, target, headers, body, route, params, source_ip)
        started = time.monotonic()
        try:
            response = self._lambda.invoke(FunctionName=route.function_name, Payload=json.dumps(event).encode())
        except Exception as exc:  # noqa: BLE001 - any integration failure is API Gateway's 500
            log.error("%s %s: integration failed: %s", method, path, exc)
            return 500, {"Content-Type": "application/json"}, b'{"message":"Internal Server Error"}'
        raw = response["Payload"].read()
        log.info("%s %s -> %s (%.0f ms)", method, path, route.function_name, (time.monotonic() - started) * 1000)
        if response.get("FunctionError"):
            log.error("%s %s: function error: %s", method, path, raw[:500])
            return 500, {"Content-Type": "application/json"}, b'{"message":"Internal Server Error"}'
        try:
            result = json.loads(raw)
        except ValueError:
            return 500, {"Content-Type": "application/json"}, b'{"message":"Internal Server Error"}'
        if not isinstance(result, dict) or "statusCode" not in result:
            # Payload format 2.0: a response without statusCode is treated as a 200 JSON body.
            return 200, {"Content-Type": "application/json"}, json.dumps(result).encode()
        out_headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            out_headers[name] = ",".join(str(v) for v in values)
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else str(payload).encode()
        if result.get("cookies"):
            out_headers["Set-Cookie"] = "; ".join(result["cookies"])
        out_headers.setdefault("Content-Type", "application/json")
        out_headers["apigw-requestid"] = event["requestContext"]["requestId"]
        return int(result["statusCode"]), out_headers, data

    # ---------------------------------------------------------------- HTTP server
    def serve(self, host: str, port: int) -> ThreadingHTTPServer:
        door = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "omnireel-local-apigw"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, data = door.handle(
                    self.command, self.path, dict(self.headers.items()), body, self.client_address[0]
                )
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _any

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("front door: " + format, *args)

        self._server = _FrontDoorServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="front-door", daemon=True).start()
        return self._server

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
