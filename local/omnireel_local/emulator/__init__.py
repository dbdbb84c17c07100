"""Contract-faithful emulator of the AWS vLLM-Omni DLC container (``vllm:omni-sagemaker-cuda-v1.6``, vLLM-Omni 0.26.0).

A DEVELOPMENT TOOL, not the real model: it serves the container's HTTP/WebSocket contract with real media
(PNG images, H.264 MP4 videos, 24 kHz PCM16 speech) synthesized on the CPU. Every HTTP response carries
``X-Omnireel-Emulator: vllm-omni-emulator``.

Entry points: ``create_app(EmulatorConfig)`` and ``python -m omnireel_local.emulator``. See ``config`` for the
environment variables and ``control`` for the runtime control API.
"""

from .app import BANNER, create_app
from .config import EmulatorConfig, RouteFaults
from .middleware import EMULATOR_HEADER, EMULATOR_HEADER_VALUE, SageMakerRouteMiddleware

__all__ = [
    "BANNER",
    "EMULATOR_HEADER",
    "EMULATOR_HEADER_VALUE",
    "EmulatorConfig",
    "RouteFaults",
    "SageMakerRouteMiddleware",
    "create_app",
]
