"""The local front door: HTTP requests -> API Gateway HTTP API (payload format 2.0) proxy events -> Lambda Invoke.

Routes come from the HTTP API's OpenAPI body in the transformed template (``Provisioned.routes``), so a route added to
template.yaml is served here without code changes. The function is invoked through the local Lambda Invoke API (the
same path API Gateway uses), and its ``{statusCode, headers, body, isBase64Encoded, cookies}`` answer becomes the
HTTP response.

As strict as API Gateway at the door:
- IAM auth (``iam.authorizer``): a route with ``AWS_IAM`` needs a valid SigV4 signature (service ``execute-api``) by
  an access key the local IAM/STS knows, whose policies allow ``execute-api:Invoke`` on the route; otherwise 403 with
  API Gateway's ``{"message": ...}``. Distinct keys are distinct callers in ``requestContext.authorizer.iam``.
- The body: at most 10 MB (413 ``Request Entity Too Large``, decided from Content-Length or while reading chunks,
  never by buffering more); a missing or invalid Content-Length framing is a 400 JSON answer, not a dropped
  connection.
- The Lambda proxy event: at most 6 MB (``LAMBDA_MAX_REQUEST_BYTES``, Lambda's synchronous request payload, the
  event as JSON: a JSON body's quotes escaped, a binary body base64-encoded, the headers too). A request within
  the 10 MB quota whose event is larger never reaches the function: 413 ``{"message": "Request Too Long"}`` (what API
  Gateway answers a Lambda-proxy request over Lambda's limit; observed on a REST API -- HTTP API's exact wording is
  unverified, docs/decisions.md). ``POST /batches`` is therefore at most ~6 MB; larger batches go through
  ``POST /batches/uploads``.
- Framing as RFC 9112 says (``framing``), so no request hides inside another (request smuggling): a
  Transfer-Encoding other than one final ``chunked`` is a 400 (501 for a coding before it the door does not
  implement, e.g. ``gzip, chunked``), as are Transfer-Encoding with Content-Length, Transfer-Encoding in HTTP/1.0,
  differing Content-Lengths, a chunk size that is not hex digits, a line that is not a header field (whitespace
  before the colon, junk), obs-fold and CR/LF/NUL inside a value. Each such answer closes the connection: nothing
  after a request the door could not frame is read as another request.
- Text bodies (``text/*``, ``application/json|xml|javascript``) that are valid UTF-8 reach the function as text;
  anything else -- other content types, no content type, or text that is not UTF-8 -- is base64 with
  ``isBase64Encoded: true`` (payload format 2.0).
- Repeated headers (and query parameters) reach the function joined with commas, as in payload format 2.0.
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
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
from botocore.config import Config

from .iam.authorizer import Refused, authorize
from .iam.policy import Principal
from .provision import Route

log = logging.getLogger("omnireel_local.api")

INTEGRATION_TIMEOUT_S = 30  # API Gateway's maximum integration timeout for HTTP APIs
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # HTTP API quota "Payload size: 10 MB" (not adjustable)
# Lambda Invoke, synchronous: "Request must be smaller than 6291456 bytes" (the Invoke reference's 6 MB). API Gateway
# passes the whole proxy event as that request, so the effective body limit of a Lambda route is below 6 MB.
LAMBDA_MAX_REQUEST_BYTES = 6 * 1024 * 1024
CLIENT_TIMEOUT_S = 30  # a client that stops sending mid-request does not hold a thread forever
# Delivered as text (isBase64Encoded false): these types only; form posts and missing types arrive base64-encoded.
_TEXT = re.compile(r"^\s*(text/|application/(json|xml|javascript)\b)", re.IGNORECASE)
_DIGITS = re.compile(r"^[0-9]{1,19}$")
_HEX = re.compile(rb"^[0-9A-Fa-f]{1,16}$")  # chunk-size = 1*HEXDIG (int(x, 16) also takes "0x", "+", "_")
JSON = "application/json"


class BadRequest(Exception):
    """The request cannot be framed or is too large: answered with ``{"message": ...}`` and the connection closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def framing(headers: Message, version: str) -> int | None:
    """How the request's body is delimited (RFC 9112 section 6): ``None`` for chunked, else its Content-Length (0
    without one). ``BadRequest`` for any framing two parsers could read differently; the caller closes the connection.

    ``headers`` is http.server's parse: a line that is not a field line ends it early (the rest lands in the
    payload, with a defect), so a ``Content-Length`` after ``Transfer-Encoding : chunked`` would otherwise be lost.
    """
    if headers.defects or headers.get_payload():  # "Name : value", junk lines, a first line that is a continuation
        raise BadRequest(400, "Bad Request")
    if any(ch in value for _, value in headers.items() for ch in "\r\n\x00"):  # obs-fold, bare CR, NUL (RFC 9112 5.2)
        raise BadRequest(400, "Bad Request")
    codings = [c.strip().lower() for value in headers.get_all("Transfer-Encoding") or [] for c in value.split(",")]
    lengths = [v.strip() for value in headers.get_all("Content-Length") or [] for v in value.split(",")]
    if codings:
        single_final_chunked = codings[-1] == "chunked" and codings.count("chunked") == 1 and "" not in codings
        if lengths or version == "HTTP/1.0" or not single_final_chunked:
            raise BadRequest(400, "Bad Request")  # 6.1: not a final, single chunked -> 400 and close
        if len(codings) > 1:  # e.g. "gzip, chunked": a transfer coding the door does not implement
            raise BadRequest(501, "Not Implemented")
        return None
    if not lengths:
        return 0
    if len(set(lengths)) != 1 or not _DIGITS.match(lengths[0]):
        raise BadRequest(400, "Bad Request")
    return int(lengths[0])


def lambda_payload_bytes(event: dict[str, Any]) -> int:
    """The proxy event's size as Lambda counts an Invoke request: its JSON in UTF-8 bytes (characters as they are,
    not the 6-byte ASCII escapes ``json.dumps`` writes by default)."""
    return len(json.dumps(event, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _utf8(value: str) -> str:
    """A header value as sent: http.server decodes header bytes as Latin-1; clients (and SigV4) mean UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _message(status: int, message: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": JSON, **headers}, json.dumps({"message": message}).encode()


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

    def route_arn(self, method: str, path: str) -> str:
        """The resource an ``execute-api:Invoke`` policy statement names for this request."""
        return f"arn:aws:execute-api:{self.region}:{self.account_id}:{self.api_id}/$default/{method}{path}"

    def event(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes, route: Route,
              params: dict[str, str], source_ip: str, principal: Principal | None = None
              ) -> dict[str, Any]:  # fmt: skip
        split = urlsplit(target)
        lowered: dict[str, str] = {}
        for key, value in headers:
            key = key.lower()
            lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
        text: str | None = None
        if body and _TEXT.match(lowered.get("content-type", "")):
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # not UTF-8 after all: delivered base64-encoded, as binary
        now = datetime.now(UTC)
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
            "isBase64Encoded": bool(body) and text is None,
        }
        if principal is not None:
            event["requestContext"]["authorizer"] = {"iam": principal.authorizer_iam()}
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
            event["body"] = text if text is not None else base64.b64encode(body).decode()
        return event

    def handle(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes, source_ip: str
               ) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        path = urlsplit(target).path
        matched = self.match(method, path)
        if matched is None:
            return _message(404, "Not Found")
        route, params = matched
        principal = None
        if route.authorization == "AWS_IAM":
            try:
                principal = authorize(method=method, target=target, headers=headers, body=body, region=self.region,
                                      route_arn=self.route_arn(method, path))  # fmt: skip
            except Refused as exc:
                log.info("%s %s: refused (%s): %s", method, path, exc.error_type, exc.message)
                return _message(exc.status, exc.message, **{"x-amzn-ErrorType": exc.error_type})
        event = self.event(method, target, headers, body, route, params, source_ip, principal)
        size = lambda_payload_bytes(event)
        if size > LAMBDA_MAX_REQUEST_BYTES:
            log.info("%s %s: the Lambda event is %d bytes (over %d): 413", method, path, size, LAMBDA_MAX_REQUEST_BYTES)
            return _message(413, "Request Too Long", **{"x-amzn-ErrorType": "BadRequestException"})
        started = time.monotonic()
        try:
            response = self._lambda.invoke(FunctionName=route.function_name, Payload=json.dumps(event).encode())
        except Exception as exc:  # noqa: BLE001 - any integration failure is API Gateway's 500
            log.error("%s %s: integration failed: %s", method, path, exc)
            return _message(500, "Internal Server Error")
        raw = response["Payload"].read()
        log.info("%s %s -> %s (%.0f ms)", method, path, route.function_name, (time.monotonic() - started) * 1000)
        if response.get("FunctionError"):
            log.error("%s %s: function error: %s", method, path, raw[:500])
            return _message(500, "Internal Server Error")
        try:
            result = json.loads(raw)
        except ValueError:
            return _message(500, "Internal Server Error")
        if not isinstance(result, dict) or "statusCode" not in result:
            # Payload format 2.0: a response without statusCode is treated as a 200 JSON body.
            return 200, {"Content-Type": JSON}, json.dumps(result).encode()
        out_headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            out_headers[name] = ",".join(str(v) for v in values)
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else str(payload).encode()
        if result.get("cookies"):
            out_headers["Set-Cookie"] = "; ".join(result["cookies"])
        out_headers.setdefault("Content-Type", JSON)
        out_headers["apigw-requestid"] = event["requestContext"]["requestId"]
        return int(result["statusCode"]), out_headers, data

    # ---------------------------------------------------------------- HTTP server
    def serve(self, host: str, port: int) -> ThreadingHTTPServer:
        door = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "omnireel-local-apigw"
            # The status line and headers go out before the body: with Nagle's algorithm the body then waited for the
            # client's delayed ACK (up to 40 ms on Linux) on every kept-alive answer. API Gateway has no such stall.
            disable_nagle_algorithm = True
            timeout = CLIENT_TIMEOUT_S

            def _any(self) -> None:
                try:
                    body = self._body()
                except BadRequest as exc:
                    log.info("%s %s: %d %s", self.command, self.path[:200], exc.status, exc.message)
                    self._reply(*_message(exc.status, exc.message), close=True)
                    return
                except TimeoutError:
                    self._reply(*_message(400, "Bad Request"), close=True)
                    return
                headers = [(name, _utf8(value)) for name, value in self.headers.items()]
                self._reply(*door.handle(self.command, self.path, headers, body, self.client_address[0]))

            def _body(self) -> bytes:
                """The request body, framed by Content-Length or chunked encoding (``framing``), never more than
                10 MB read."""
                length = framing(self.headers, self.request_version)
                if length is None:
                    return self._chunked()
                if length > MAX_PAYLOAD_BYTES:
                    raise BadRequest(413, "Request Entity Too Large")
                body = self.rfile.read(length) if length else b""
                if len(body) != length:
                    raise BadRequest(400, "Bad Request")  # the client sent less than it announced
                return body

            def _chunked(self) -> bytes:
                parts: list[bytes] = []
                total = 0
                while True:
                    line = self.rfile.readline(1026)
                    digits = line.split(b";", 1)[0].rstrip(b"\r\n").rstrip(b" \t")  # BWS before an extension
                    if not _HEX.match(digits):
                        raise BadRequest(400, "Bad Request")
                    size = int(digits, 16)
                    if size == 0:
                        for _ in range(100):  # trailers, up to the blank line
                            if self.rfile.readline(8194) in (b"\r\n", b"\n", b""):
                                return b"".join(parts)
                        raise BadRequest(400, "Bad Request")
                    total += size
                    if total > MAX_PAYLOAD_BYTES:
                        raise BadRequest(413, "Request Entity Too Large")
                    chunk = self.rfile.read(size)
                    if len(chunk) != size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                        raise BadRequest(400, "Bad Request")
                    parts.append(chunk)

            def _reply(self, status: int, headers: dict[str, str], data: bytes, close: bool = False) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(key, value)
                if not any(k.lower() == "apigw-requestid" for k in headers):
                    self.send_header("apigw-requestid", str(uuid.uuid4()))
                self.send_header("Content-Length", str(len(data)))
                if close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
                # Malformed request lines, oversized headers, unknown methods: JSON like API Gateway, not HTML, and
                # with a status line and headers even when the request line was too broken to name a version.
                self.request_version = "HTTP/1.1"
                self._reply(*_message(code, message or HTTPStatus(code).phrase), close=True)

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
