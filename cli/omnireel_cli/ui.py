"""``omnireel ui``: a page on loopback to submit a prompt, watch its stages live, see the image, play the MP4, cancel,
list your jobs and follow a batch -- against the local stack or a deployed one (``--stack``).

The browser never signs anything: the page calls this process (``/api/...``), which calls the omnireel API through the
Python client (``omnireel_client``) as you, and streams the artifacts (``/media/<job>/<image|video>``, Range requests
passed through so the video element can seek). Whatever reaches the port acts as you, so:

- it listens on loopback only (``--listen`` refuses any other address);
- a request whose ``Host`` is not the loopback address it serves is refused (DNS rebinding);
- every ``/api`` call needs the page's per-run token in ``X-Omnireel-Ui`` (a custom header: another site's page in the
  same browser cannot send it without a CORS preflight, which this server never grants); ``/media`` takes it as ``t=``;
- the page is served with a Content-Security-Policy that allows this origin only.

Whatever a request carries (a token that is not ASCII, a body key named ``self``, a body nested deeper than the JSON
parser goes), it gets an answer: a 4xx with what is wrong, or a 500 (the error logged here), never a dropped connection.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
import secrets
import signal
import sys
import threading
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .listen import parse_loopback
from .target import Target

PAGE = Path(__file__).with_name("static") / "ui.html"
DEFAULT_LISTEN = "127.0.0.1:8092"
MAX_BODY_BYTES = 1024 * 1024
MEDIA_CHUNK = 256 * 1024
JOB_PATH = re.compile(r"^/api/jobs/(?P<id>[0-9a-fA-F-]{36})$")
BATCH_PATH = re.compile(r"^/api/batches/(?P<id>[0-9a-fA-F-]{36})$")
MEDIA_PATH = re.compile(r"^/media/(?P<id>[0-9a-fA-F-]{36})/(?P<name>image|video|event)$")
MEDIA_TYPES = {"image": "image/png", "video": "video/mp4"}
EXTENSIONS = {"image": "png", "video": "mp4", "event": "json"}
TERMINAL = ("succeeded", "failed", "cancelled", "expired")
LIMIT = re.compile(r"[0-9]{1,4}")
# The body keys of POST /api/jobs the client takes as its own options (the others go into the request as they are).
TEXT_OPTIONS = ("webhook", "idempotency_key")
PASSED_MEDIA_HEADERS = ("Content-Type", "Content-Length", "Content-Range", "Accept-Ranges", "ETag", "Last-Modified")
CSP = (
    "default-src 'self'; img-src 'self'; media-src 'self'; style-src 'self' 'unsafe-inline'; "
    "script-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def parse_listen(value: str) -> tuple[str, int]:
    return parse_loopback(value, "the page acts as your AWS identity")


class UiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target: Target, host: str, port: int) -> None:
        self.target = target
        self.token = secrets.token_urlsafe(24)
        super().__init__((host, port), Handler)
        self.port = int(self.server_address[1])
        self.hosts = {f"{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def page(self) -> bytes:
        return (
            PAGE.read_text()
            .replace("__OMNIREEL_UI_TOKEN__", self.token)
            .replace("__OMNIREEL_UI_TARGET__", json.dumps(self.target.name)[1:-1])
            .encode()
        )


class Handler(BaseHTTPRequestHandler):
    server: UiServer
    protocol_version = "HTTP/1.1"

    # ---------------------------------------------------------------- plumbing
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _error(self, status: int, code: str, message: str, problems: list[dict[str, str]] | None = None) -> None:
        self._json(status, {"error": {"code": code, "message": message, "problems": problems or []}})

    def _allowed(self, token: str | None) -> bool:
        if self.headers.get("Host") not in self.server.hosts:
            self.close_connection = True
            self._error(421, "WrongHost", "this page answers on its loopback address only")
            return False
        if token is None or not _same_token(token, self.server.token):
            self.close_connection = True  # its body (if any) is not read: it must not be taken as the next request
            self._error(403, "Forbidden", "missing or wrong page token: reload the page")
            return False
        return True

    def _body(self) -> Any:
        declared = (self.headers.get("Content-Length") or "0").strip()
        if not declared.isascii() or not declared.isdigit():
            self.close_connection = True  # the body's end is unknown: the connection cannot carry another request
            raise ValueError("Content-Length is not a number of bytes")
        length = int(declared)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ValueError(f"the request is over {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(self.rfile.read(length) or b"{}")
        except RecursionError:
            raise ValueError("nested too deeply") from None
        if not isinstance(data, dict):
            raise ValueError("send a JSON object")
        return data

    def _api(self, call: Callable[[], Any]) -> None:
        """Run a client call; its answer as JSON, or its error with the API's status, code and problems."""
        from omnireel_client import ApiError, OmnireelClientError, TransportError

        try:
            self._json(200, call())
        except ApiError as exc:
            problems = [{"field": p.field, "message": p.message} for p in exc.problems]
            self._error(exc.status, exc.code, exc.message, problems)
        except TransportError as exc:
            self._error(502, "Unreachable", str(exc))
        except OmnireelClientError as exc:
            self._error(500, type(exc).__name__, str(exc))
        except ValueError as exc:
            self._error(400, "InvalidRequest", str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug here: answer it (and log it), never drop the connection
            traceback.print_exc(file=sys.stderr)
            self._error(500, "InternalError", f"omnireel ui failed: {type(exc).__name__} (logged where it runs)")

    # ---------------------------------------------------------------- routes
    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        client = self.server.target.api_client
        if url.path in ("/", "/index.html"):
            if self.headers.get("Host") not in self.server.hosts:
                self._error(421, "WrongHost", "this page answers on its loopback address only")
                return
            headers = {"Content-Security-Policy": CSP, "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
            self._send(200, self.server.page(), "text/html; charset=utf-8", headers)
            return
        if (media := MEDIA_PATH.match(url.path)) is not None:
            if self._allowed(query.get("t")):
                self._media(media["id"], media["name"], download=query.get("download") == "1")
            return
        if not self._allowed(self.headers.get("X-Omnireel-Ui")):
            return
        if url.path == "/api/info":
            self._json(200, {"target": self.server.target.name, "api_url": self.server.target.api_url})
        elif url.path == "/api/jobs":
            limit = int(query["limit"]) if LIMIT.fullmatch(query.get("limit", "")) else 20
            self._api(lambda: client.jobs_page(query.get("status") or None, limit=limit,
                                               cursor=query.get("cursor") or None).raw)  # fmt: skip
        elif (job := JOB_PATH.match(url.path)) is not None:
            self._api(lambda: _job_view(client.job(job["id"])))
        elif (batch := BATCH_PATH.match(url.path)) is not None:
            self._api(lambda: client.batch(batch["id"]).raw)
        else:
            self._error(404, "NotFound", f"no route {url.path}")

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if not self._allowed(self.headers.get("X-Omnireel-Ui")):
            return
        client = self.server.target.api_client
        try:
            body = self._body()
        except ValueError as exc:
            self._error(400, "InvalidRequest", f"the body is not a JSON object: {exc}")
            return
        if path == "/api/jobs":
            prompt = body.pop("prompt", None)
            if not isinstance(prompt, str):
                self._error(400, "InvalidRequest", "prompt: a text is required")
                return
            wrong = [name for name in TEXT_OPTIONS if name in body and not isinstance(body[name], str)]
            if wrong:
                self._error(400, "InvalidRequest", f"{wrong[0]}: a text is required")
                return
            # Every other key (``self`` too: the client's ``submit`` takes its ``self`` positionally) goes into the
            # request as it is; the API refuses one it does not know, with its reason.
            self._api(lambda: _job_view(client.submit(prompt, **body)))
        elif path == "/api/batches":
            prompts = body.get("prompts")
            if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
                self._error(400, "InvalidRequest", "prompts: a list of texts is required")
                return
            self._api(lambda: client.submit_batch([p for p in prompts if p.strip()]).raw)
        else:
            self._error(404, "NotFound", f"no route {path}")

    def do_DELETE(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if not self._allowed(self.headers.get("X-Omnireel-Ui")):
            return
        if (job := JOB_PATH.match(path)) is None:
            self._error(404, "NotFound", f"no route {path}")
            return
        client = self.server.target.api_client

        def cancel() -> dict[str, Any]:
            cancelled = client.cancel(job["id"])
            note = cancelled.cancellation.note if cancelled.cancellation else ""
            return {**_job_view(cancelled), "cancellation_note": note}

        self._api(cancel)

    def _media(self, job_id: str, name: str, download: bool = False) -> None:
        """Stream the job's image or video from its presigned URL (refreshed by the client when it has expired),
        passing ``Range`` through so the video element can seek; ``download``: as an attachment with a file name."""
        from omnireel_client import ApiError, OmnireelClientError

        disposition = {"Content-Disposition": f'attachment; filename="{job_id}-{name}.{EXTENSIONS[name]}"'}
        try:
            job = self.server.target.api_client.job(job_id)
            if name == "event":  # the terminal event as consumers received it (GET /jobs/{id}/event)
                body = json.dumps(job.event(), indent=2).encode()
                self._send(200, body, "application/json", disposition if download else None)
                return
            artifact = job.artifacts.get(name)
            if artifact is not None and artifact.expired:
                artifact = job.refresh().artifacts.get(name)
        except ApiError as exc:  # the API's own answer: its status and code (Forbidden, Throttled, ...), not NotFound
            self._error(exc.status, exc.code or "ApiError", exc.message)
            return
        except OmnireelClientError as exc:
            self._error(502, "Unreachable", f"cannot ask the API for job {job_id}: {exc}")
            return
        if artifact is None or not artifact.url.startswith(("http://", "https://")):
            self._error(404, "NotFound", f"job {job_id} has no {name} (yet)")
            return
        headers = {"Range": self.headers["Range"]} if self.headers.get("Range") else {}
        request = urllib.request.Request(artifact.url, headers=headers)  # noqa: S310 - a presigned S3 URL (http/s)
        try:
            upstream = urllib.request.urlopen(request, timeout=60)  # noqa: S310
        except urllib.error.HTTPError as exc:
            upstream = exc
        except OSError as exc:
            self._error(502, "Unreachable", f"cannot read the {name}: {exc}")
            return
        with contextlib.closing(upstream):
            status = upstream.status if hasattr(upstream, "status") else upstream.code
            self.send_response(status)
            for header in PASSED_MEDIA_HEADERS:
                if (value := upstream.headers.get(header)) is not None:
                    self.send_header(header, MEDIA_TYPES[name] if header == "Content-Type" else value)
            self.send_header("Cache-Control", "private, max-age=300")
            if download:
                self.send_header(*next(iter(disposition.items())))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                while chunk := upstream.read(MEDIA_CHUNK):
                    self.wfile.write(chunk)


def _same_token(given: str, token: str) -> bool:
    """``given`` is the page's token: compared as bytes in constant time (``hmac.compare_digest`` refuses a ``str``
    with a character that is not ASCII, which a header or a ``t=`` may carry)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def _job_view(job: Any) -> dict[str, Any]:
    """What the page needs of a job: the API's answer without its presigned URLs (the page loads ``/media``)."""
    view = {k: v for k, v in job.raw.items() if k != "artifacts"}
    view["job_id"], view["status"] = job.job_id, job.status
    # the terminal event is downloadable once the job has ended (its event is published with the terminal transition)
    view["artifacts"] = sorted([*job.artifacts, *(["event"] if job.status in TERMINAL else [])])
    view["video_request"] = (job.request or {}).get("video")
    return view


def serve(target: Target, listen: str, ready: Callable[[UiServer], None] | None = None,
          stop: threading.Event | None = None) -> int:  # fmt: skip
    """Serve until Ctrl-C / SIGTERM (or ``stop``); ``ready(server)`` once listening."""
    host, port = parse_listen(listen)
    target.api_client  # noqa: B018 - fail now (no credentials, bad URL) rather than on the first click
    server = UiServer(target, host, port)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    print(f"omnireel ui ({target.name}): {server.url}  (loopback only; Ctrl-C stops)", flush=True)
    if ready is not None:
        ready(server)
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    print("omnireel ui stopped", file=sys.stderr, flush=True)
    return 0
