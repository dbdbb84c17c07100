"""The emulator's own control API (not part of the container contract).

- ``GET /_emulator/config``: the live ``EmulatorConfig`` as JSON.
- ``PUT /_emulator/config``: a partial JSON patch, e.g. ``{"faults": {"images": {"error_rate": 1}}}``;
  ``faults`` merge per route and key (``{"faults": {"images": null}}`` clears a route).
  Returns the new config; 400 if invalid.
- ``GET /_emulator/stats``: per-route-kind counters (requests and outcomes), per-path response status counts, and
  ``service_times``: ``[path, status, started, finished, body_sha256]`` (epoch seconds; the hex SHA-256 of the request
  body as received, before any JSON-to-multipart conversion) of the last 2,000 POSTs.
  ``concurrency``: per gated route kind (images, videos), ``capacity`` (per instance x instances, as last seen),
  ``in_flight`` and ``waiting`` now, ``peak_in_flight`` and ``peak_waiting`` since the last reset, ``started``,
  ``waited`` and ``abandoned`` (``capacity``).
- ``DELETE /_emulator/stats``: reset the counters (the peaks restart from what is in flight and waiting now).
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .errors import EmulatorError, validation_error
from .state import get_state


def _config_json(request: Request) -> dict:
    state = get_state(request)
    data = state.config.model_dump(mode="json")
    data["served_kinds"] = sorted(state.config.served_kinds())
    return data


async def get_config(request: Request) -> Response:
    return JSONResponse(_config_json(request))


async def put_config(request: Request) -> Response:
    state = get_state(request)
    try:
        patch = await request.json()
    except ValueError as exc:
        raise EmulatorError(400, f"JSON decode error: {exc}") from exc
    if not isinstance(patch, dict):
        raise EmulatorError(400, "The config patch must be a JSON object")
    patch.pop("served_kinds", None)
    try:
        new_config = state.config.merged(patch)
    except ValidationError as exc:
        raise validation_error(exc) from exc
    state.replace_config(new_config)
    return JSONResponse(_config_json(request))


def _stats(request: Request) -> dict:
    state = get_state(request)
    return {**state.injector.stats(), "concurrency": state.gate.stats()}


async def get_stats(request: Request) -> Response:
    return JSONResponse(_stats(request))


async def reset_stats(request: Request) -> Response:
    state = get_state(request)
    state.injector.reset_stats()
    state.gate.reset()
    return JSONResponse(_stats(request))
