"""Contract-faithful emulator of the AWS vLLM-Omni DLC container (``vllm:omni-sagemaker-cuda-v1.6``, vLLM-Omni 0.26.0).

A DEVELOPMENT TOOL, not the real model: it serves the container's HTTP/WebSocket contract with real media
(PNG images, H.264 MP4 videos, 24 kHz PCM16 speech) synthesized on the CPU. Every HTTP response carries
``X-Omnireel-Emulator: vllm-omni-emulator``.

Entry points: ``create_app(EmulatorConfig)`` and ``python -m omnireel_local.emulator``. See ``config`` for the
environment variables and ``control`` for the runtime control API.

The exports below load on first use (PEP 562): the local stack imports ``config`` (the model -> served-kinds rule)
from .venv, which has no PyAV or numpy; only the emulator process (.venv-emulator's Python) imports the media code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import BANNER, create_app
    from .config import EmulatorConfig, RouteFaults
    from .middleware import EMULATOR_HEADER, EMULATOR_HEADER_VALUE, SageMakerRouteMiddleware

_EXPORTS = {
    "BANNER": "app",
    "create_app": "app",
    "EmulatorConfig": "config",
    "RouteFaults": "config",
    "EMULATOR_HEADER": "middleware",
    "EMULATOR_HEADER_VALUE": "middleware",
    "SageMakerRouteMiddleware": "middleware",
}

__all__ = [
    "BANNER",
    "EMULATOR_HEADER",
    "EMULATOR_HEADER_VALUE",
    "EmulatorConfig",
    "RouteFaults",
    "SageMakerRouteMiddleware",
    "create_app",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
