"""The local AWS's HTTP endpoint: moto's WSGI application behind a threaded HTTP/1.1 server whose connections stay
open between requests, as AWS's endpoints' do.

moto's ``ThreadedMotoServer`` runs werkzeug's development server, which answers every request with
``Connection: close``: each AWS call of every Lambda worker, test and CLI opened a new TCP connection, the server
started a thread for it (``Thread.start`` alone was ~10 % of the stack process's CPU in a profiled ``make test``), and
the thread then waited 10 ms for stray request bytes before closing. Here a connection serves one request after
another until its client closes it, asks to close it, or leaves it idle for ``IDLE_TIMEOUT_S``:
- the request body is read before the application runs (``Content-Length`` bytes, or a chunked body to its end) and
  handed to it in memory, so whatever the application reads or leaves, the next request starts where it should;
- the answer is buffered and sent with its ``Content-Length`` (moto builds its answers in memory anyway); a HEAD answer
  keeps the length the application gave and has no body;
- an HTTP/1.0 request, a client's ``Connection: close``, a chunked request body (trailers would be left unread) or an
  application error closes the connection after the answer.

Per request, less CPU for the same answers (py-spy of a GetItem loop, shares of the stack process's CPU per call):
- werkzeug formatted an access-log line for every answer (~2 %) that its logger, set to WARNING by the stack, drops:
  the line is made only when the logger would keep it;
- the ``Date`` header is formatted once a second, not once an answer (~1.5 %);
- moto creates its per-service Flask applications in debug mode, whose request helpers (the form data's debug
  wrapper, ~3 %) only improve error messages of Flask misuse: here they run with ``debug`` off and
  ``PROPAGATE_EXCEPTIONS`` on, so an application error still reaches ``run_wsgi`` (logged, 500) as before;
- the stack process reads header blocks with ``http_headers`` (a fast path for the email parser, ~7 %);
- an SDK's request reaches moto's handler without Flask's request machinery (``ServiceApp``, ~11 % under a pipeline's
  load; a browser's request and an unmatched URL still go through Flask).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from typing import Any

from botocore.exceptions import ClientError
from flask import Flask, Response
from moto.core.request import normalize_request
from moto.core.utils import convert_to_flask_response
from moto.moto_api import recorder
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.exceptions import HTTPException
from werkzeug.serving import BaseWSGIServer, make_server

log = logging.getLogger("omnireel_local.aws_server")
_access_log = logging.getLogger("werkzeug")

IDLE_TIMEOUT_S = 300  # a kept-alive connection with no request for this long is closed (its thread ends)
_NO_BODY_STATUS = frozenset({204, 304})


class KeepAliveHandler(MotoRequestHandler):
    """moto's request handler (its header handling) with the request/answer cycle above instead of werkzeug's."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S  # socketserver sets it on the connection: an idle client cannot hold a thread for ever
    # The status line and headers, then the body: with Nagle's algorithm the body waited for the client's delayed ACK
    # (Linux: up to 40 ms) on every answer of a kept-alive connection (as the front door, api_gateway.py).
    disable_nagle_algorithm = True

    _date: tuple[int, str] = (0, "")  # (second, its Date header): shared by the handlers, replaced whole

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if _access_log.isEnabledFor(logging.INFO):
            super().log_request(code, size)

    def date_time_string(self, timestamp: float | None = None) -> str:
        if timestamp is not None:
            return super().date_time_string(timestamp)
        second = int(time.time())
        cached = KeepAliveHandler._date
        if cached[0] != second:
            cached = KeepAliveHandler._date = (second, super().date_time_string(second))
        return cached[1]

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
        self.environ = environ = self.make_environ()
        keep = self.request_version == "HTTP/1.1" and "close" not in self.headers.get("Connection", "").lower()
        if environ.get("wsgi.input_terminated"):  # chunked: read through werkzeug's de-chunking to its last chunk
            body = environ["wsgi.input"].read()
            keep = False
        else:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = self.rfile.read(length) if length else b""  # buffered: blocks for all of it, or the end
            if len(body) < length:  # the client went away mid-body
                self.close_connection = True
                return
        environ["wsgi.input"] = io.BytesIO(body)
        environ.pop("wsgi.input_terminated", None)
        environ["CONTENT_LENGTH"] = str(len(body))
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if exc_info and answer:
                raise exc_info[1].with_traceback(exc_info[2])
            answer["status"], answer["headers"] = status, headers
            return lambda data: chunks.append(data)

        chunks: list[bytes] = []
        try:
            result = self.server.app(environ, start_response)
            try:
                chunks.extend(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
        except Exception:  # as werkzeug: log it, answer 500, and (here) close the connection
            if self.server.passthrough_errors:
                raise
            log.exception("error on request %s %s", self.command, self.path)
            answer = {"status": "500 INTERNAL SERVER ERROR", "headers": [("Content-Type", "text/plain")]}
            chunks = [b"Internal Server Error"]
            keep = False
        self._answer(answer["status"], answer["headers"], b"".join(chunks), keep)

    def _answer(self, status: str, headers: list[tuple[str, str]], data: bytes, keep: bool) -> None:
        code_text, _, message = status.partition(" ")
        code = int(code_text)
        self.send_response(code, message)
        given_length = None
        for name, value in headers:
            lowered = name.lower()
            if lowered == "content-length":
                given_length = value
            elif lowered not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(name, value)
        has_body = self.command != "HEAD" and code not in _NO_BODY_STATUS and code >= 200
        if has_body:
            self.send_header("Content-Length", str(len(data)))
        elif given_length is not None and self.command == "HEAD":
            self.send_header("Content-Length", given_length)
        if not keep:
            self.send_header("Connection", "close")  # also sets close_connection
        self.end_headers()
        if has_body and data:
            self.wfile.write(data)
        self.wfile.flush()


# What flask_cors (moto's apps are wrapped with ``CORS(app)``: every origin, ``always_send``) adds to the answer of a
# request that has no ``Origin`` header. tests/unit/local/test_aws_server_direct.py compares the direct path's answers
# with Flask's, headers included, so a change of flask_cors (or of moto's use of it) fails there, not in a browser.
_CORS_WITHOUT_ORIGIN = (("Access-Control-Allow-Origin", "*"),)


class ServiceApp:
    """One service's moto application, called without Flask's per-request machinery.

    For each request Flask pushed an application and a request context, opened a session, sent its signals, and ran
    flask_cors's ``after_request`` hook around moto's view (``convert_to_flask_response``): ~11 % of the stack
    process's CPU under a pipeline's load (py-spy, 60 jobs), for answers that depend on none of it. Here the request
    is matched on the same URL map, built as the same ``BackendRequest`` and handed to the same moto handler as
    ``convert_to_flask_response`` hands it, and the answer is the same ``flask.Response`` with flask_cors's header.

    Flask still answers what this path does not model: a browser's request (an ``Origin`` header, or ``OPTIONS``:
    flask_cors's preflight and origin handling) and a URL the map does not match (Flask's 404/405/redirect). An
    exception of the handler propagates as before (``PROPAGATE_EXCEPTIONS``: logged, 500, by ``run_wsgi``); an HTTP
    exception becomes its answer, as Flask makes it."""

    def __init__(self, flask_app: Flask):
        self.flask_app = flask_app
        self._views: dict[str, Any] = flask_app.view_functions

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if "HTTP_ORIGIN" in environ or environ.get("REQUEST_METHOD") == "OPTIONS":
            return self.flask_app(environ, start_response)
        try:
            endpoint, _ = self.flask_app.url_map.bind_to_environ(environ).match()
        except HTTPException:  # no rule, a method no rule allows, a redirect: Flask's own answer
            return self.flask_app(environ, start_response)
        view = self._views[endpoint]
        if not isinstance(view, convert_to_flask_response):  # not one of moto's service views (none today)
            return self.flask_app(environ, start_response)
        request = self.flask_app.request_class(environ)
        try:
            response = _answer(view, request)
        except HTTPException as exc:
            response = Response.force_type(exc, environ)
        for name, value in _CORS_WITHOUT_ORIGIN:
            if name not in response.headers:
                response.headers[name] = value
        return response(environ, start_response)


def _answer(view: convert_to_flask_response, request: Any) -> Response:
    """What ``convert_to_flask_response.__call__`` answers, with the request given instead of Flask's global."""
    request = normalize_request(request)
    recorder._record_request(request)
    try:
        result = view.callback(request, request.raw_url, dict(request.headers))
    except ClientError as exc:
        result = 400, {}, exc.response["Error"]["Message"]
    if len(result) == 3:
        status, headers, content = result
    else:
        status, headers, content = 200, {}, result
    response = Response(response=content, status=status, headers=headers)
    if request.method == "HEAD" and "content-length" in headers:
        response.headers["Content-Length"] = headers["content-length"]
    return response


def create_service_app(service: Any) -> ServiceApp:
    """moto's application for ``service`` (``ServiceApp``), its Flask app out of debug mode (exceptions propagate)."""
    app = create_backend_app(service)
    app.debug = False
    app.config["PROPAGATE_EXCEPTIONS"] = True
    return ServiceApp(app)


class AwsServer:
    """moto's application on ``host:port`` in a thread (``ThreadedMotoServer``'s interface: start, stop)."""

    def __init__(self, host: str, port: int):
        self._host, self._port = host, port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        app = DomainDispatcherApplication(create_service_app)
        self._server = make_server(self._host, self._port, app, threaded=True, request_handler=KeepAliveHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-aws", daemon=True)
        self._thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
