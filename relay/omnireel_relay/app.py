"""Wiring: settings → token → upstream factory → server; SIGTERM/SIGINT → drain → exit."""

from __future__ import annotations

import asyncio
import logging
import signal

from . import logging as relay_logging
from .auth import Authenticator, load_token
from .server import RelayServer
from .settings import Settings
from .upstream import UpstreamFactory
from .upstream_websocket import WebSocketUpstreamFactory

log = logging.getLogger(__name__)


async def build_factory(settings: Settings) -> UpstreamFactory:
    if settings.upstream == "sagemaker":
        from .upstream_sagemaker import SageMakerUpstreamFactory

        return await SageMakerUpstreamFactory.create(settings)
    return WebSocketUpstreamFactory(settings.upstream_url, settings.upstream_connect_timeout)


async def build_server(settings: Settings) -> RelayServer:
    token = await load_token(settings)
    return RelayServer(settings, Authenticator(token), await build_factory(settings))


async def serve_until_signal(settings: Settings) -> None:
    server = await build_server(settings)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("signal received, draining", extra={"drain_seconds": settings.drain_seconds})
    await server.drain()
    log.info("relay stopped")


def main() -> None:
    settings = Settings.from_env()
    relay_logging.configure(settings.log_level)
    asyncio.run(serve_until_signal(settings))
