"""Shared helpers for the emulator unit tests (ASGI level, no sockets)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from omnireel_local.emulator import EmulatorConfig, create_app

warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
from starlette.testclient import TestClient  # noqa: E402

FAST = {"speech_realtime_factor": 0.0, "seed": 1234}


@pytest.fixture
def make_client() -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def factory(**config: Any) -> TestClient:
        client = TestClient(create_app(EmulatorConfig(**{**FAST, **config})))
        client.__enter__()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()
