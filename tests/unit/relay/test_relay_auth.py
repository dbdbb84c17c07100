"""Authentication: refused with HTTP 401 before the WebSocket upgrade."""

from __future__ import annotations

import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from omnireel_relay.auth import Authenticator
from tests.support.relay.relay_harness import CONFIG, TOKEN, open_client, relay_stack, run, speak, url_of


@pytest.mark.parametrize("token", [None, "wrong-token", TOKEN + "x", TOKEN[:-1]])
def test_missing_or_wrong_token_is_refused_with_401(token: str | None) -> None:
    async def main() -> None:
        async with relay_stack() as (server, fake):
            with pytest.raises(InvalidStatus) as info:
                await open_client(server, token=token)
            assert info.value.response.status_code == 401
            assert info.value.response.headers["WWW-Authenticate"] == "Bearer"
            assert fake.connections == 0  # no upstream stream was opened
            assert server.metrics.rejected["unauthorized"] == 1

    run(main())


def test_wrong_scheme_and_bad_subprotocol_refused() -> None:
    async def main() -> None:
        async with relay_stack() as (server, _):
            for kwargs in (
                {"additional_headers": {"Authorization": f"Basic {TOKEN}"}},
                {"subprotocols": ["omnireel.v1", "omnireel.bearer.nope"]},
            ):
                with pytest.raises(InvalidStatus) as info:
                    await connect(url_of(server), open_timeout=5, **kwargs)
                assert info.value.response.status_code == 401

    run(main())


def test_browser_subprotocol_token_accepted_and_not_echoed() -> None:
    async def main() -> None:
        async with relay_stack() as (server, _):
            ws = await connect(url_of(server), subprotocols=["omnireel.v1", f"omnireel.bearer.{TOKEN}"], open_timeout=5)
            assert ws.subprotocol == "omnireel.v1"
            assert TOKEN not in str(ws.response.headers)
            await ws.send(json.dumps(CONFIG))
            frames = await speak(ws, "hello")
            assert isinstance(frames[1], bytes)
            await ws.close()

    run(main())


def test_unknown_path_is_404() -> None:
    async def main() -> None:
        async with relay_stack() as (server, _):
            with pytest.raises(InvalidStatus) as info:
                await connect(url_of(server, "/v1/realtime"), additional_headers={"Authorization": f"Bearer {TOKEN}"})
            assert info.value.response.status_code == 404

    run(main())


def test_authenticator_constant_time_compare_semantics() -> None:
    auth = Authenticator("s3cret-token-abcdef")
    assert auth.check("Bearer s3cret-token-abcdef", [])
    assert auth.check("bearer   s3cret-token-abcdef ", [])
    assert not auth.check("Bearer s3cret-token-abcdeF", [])
    assert not auth.check(None, ["omnireel.v1"])
    assert auth.check(None, ["omnireel.v1", "omnireel.bearer.s3cret-token-abcdef"])
    with pytest.raises(RuntimeError):
        Authenticator("")


@pytest.mark.parametrize(("token", "status"), [(TOKEN, 204), (None, 401), ("wrong-token-0123456789", 401)])
def test_auth_check_route_tells_the_page_whether_its_token_is_accepted(token: str | None, status: int) -> None:
    """The relay page asks this before opening its WebSocket (which would only report close 1006)."""
    import asyncio
    import urllib.error
    import urllib.request

    async def main() -> None:
        async with relay_stack() as (server, fake):

            def get() -> int:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                url = f"http://127.0.0.1:{server.port}/auth/check"
                request = urllib.request.Request(url, headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=5) as r:  # noqa: S310 - loopback test
                        return r.status
                except urllib.error.HTTPError as e:
                    return e.code

            assert await asyncio.to_thread(get) == status
            assert fake.connections == 0

    run(main())
