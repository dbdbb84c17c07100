"""CLI: ``python -m omnireel_local.emulator --host 127.0.0.1 --port 8080 [--model NAME] ...``

Flags override the environment (``SM_VLLM_MODEL``, ``OMNIREEL_EMULATOR_*``, ``VLLM_OMNI_VIDEO_SYNC_TIMEOUT``; see
``omnireel_local.emulator.config``). Runs uvicorn in the foreground until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .. import heap
from .app import BANNER, create_app
from .config import EmulatorConfig
from .server import serve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m omnireel_local.emulator", description=BANNER)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--model", help="model to pretend to be (default: $SM_VLLM_MODEL or '*' = serve everything)")
    parser.add_argument("--routes", help="comma list overriding the served kinds: images,videos,speech")
    parser.add_argument("--seed", type=int, help="seed for fault injection and for null request seeds")
    parser.add_argument("--faults", help='JSON, e.g. \'{"images": {"error_rate": 0.5, "latency_s": 1}}\'')
    parser.add_argument("--speech-realtime-factor", type=float, help="PCM pacing speed-up (1 = real time, 0 = none)")
    parser.add_argument("--ws-config-timeout", type=float, help="seconds to wait for session.config (10)")
    parser.add_argument("--ws-idle-timeout", type=float, help="WebSocket idle timeout in seconds (30)")
    parser.add_argument("--video-sync-timeout", type=float, help="/v1/videos/sync timeout in seconds (600)")
    parser.add_argument(
        "--concurrency-per-instance", type=int,
        help="generation requests one instance runs at once (1); more wait in the container",
    )  # fmt: skip
    parser.add_argument(
        "--ws-ping-interval", type=float, default=20.0,
        help="uvicorn's WebSocket keepalive ping interval in seconds (20, uvicorn's and so vLLM-Omni's default)",
    )  # fmt: skip
    parser.add_argument("--ws-ping-timeout", type=float, default=20.0, help="uvicorn's pong timeout in seconds (20)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    return parser


def config_from_args(args: argparse.Namespace) -> EmulatorConfig:
    overrides = {
        "model": args.model,
        "routes": [r.strip() for r in args.routes.split(",") if r.strip()] if args.routes else None,
        "seed": args.seed,
        "speech_realtime_factor": args.speech_realtime_factor,
        "ws_config_timeout_s": args.ws_config_timeout,
        "ws_idle_timeout_s": args.ws_idle_timeout,
        "video_sync_timeout_s": args.video_sync_timeout,
        "concurrency_per_instance": args.concurrency_per_instance,
    }
    config = EmulatorConfig.from_env(**overrides)
    if args.faults:
        config = config.merged({"faults": json.loads(args.faults)})
    return config


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = config_from_args(args)
    logging.getLogger("omnireel_local.emulator").warning("%s: listening on http://%s:%d", BANNER, args.host, args.port)
    app = create_app(config)
    heap.settle()  # the media libraries and the app, out of every later collection (omnireel_local/heap.py)
    serve(  # uvicorn, woken once a second when idle (emulator/server.py)
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws_ping_interval=args.ws_ping_interval,
        ws_ping_timeout=args.ws_ping_timeout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
