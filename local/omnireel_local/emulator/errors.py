"""Error responses in the container's shapes.

- Handler errors (vLLM ``ErrorInfo``):
  ``{"error": {"message", "type": <HTTP phrase>, "param": null, "code": <status>}}``.
- Starlette ``HTTPException`` (multipart part too large, 404, 405): FastAPI's default ``{"detail": "..."}``,
  because in the real server that exception bypasses vLLM's handler.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


class EmulatorError(Exception):
    """Raised by handlers; rendered in the vLLM error shape."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": HTTPStatus(status).phrase, "param": None, "code": status}}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def validation_message(exc: ValidationError) -> str:
    """A compact, readable summary of pydantic errors (vLLM renders validation errors as 400 with a message)."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
        parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
    return "; ".join(parts) or "Invalid request"


def validation_error(exc: ValidationError) -> EmulatorError:
    return EmulatorError(400, validation_message(exc))


async def emulator_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EmulatorError)
    return error_response(exc.status, exc.message, exc.headers)


async def http_exception_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


EXCEPTION_HANDLERS = {EmulatorError: emulator_error_handler, HTTPException: http_exception_handler}
