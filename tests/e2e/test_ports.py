"""Fixed default ports with a fallback when one is taken (through `omnireel local up`)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from omnireel_local import home as homedir
from tests.support.stack import start_stack, stop_stack

BLOCK = 8


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default lower bound


def _free_block() -> int:
    """A base port whose block (base .. base+7) is free now (bounded search), below the kernel's ephemeral range: the
    stacks of parallel test workers take ephemeral ports, and one landing inside the block between this check and
    `local up` would make the expected fixed port look taken (as the real defaults 4710.. sit below that range)."""
    rng = random.Random()
    low = _ephemeral_low()
    for _ in range(200):
        base = rng.randrange(20000, max(20001, low - BLOCK))
        if all(homedir.port_is_free(base + i) for i in range(BLOCK)):
            return base
    raise AssertionError("no free block of ports found")


def test_fixed_ports_with_a_fallback_for_a_taken_one(tmp_path: Path) -> None:
    base = _free_block()
    with socket.socket() as squatter:  # something else already listens on the API's default port
        squatter.bind(("127.0.0.1", base + 1))
        squatter.listen()
        stack = start_stack(tmp_path / "home", env={"OMNIREEL_LOCAL_BASE_PORT": str(base)}, fixed_ports=True)
        try:
            state = stack.state()
            assert state["moto_port"] == base
            assert stack.outputs["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{base}"
            assert state["api_port"] != base + 1
            assert state["relay"]["port"] == base + 2
            emulator_ports = sorted(int(url.rsplit(":", 1)[1]) for url in state["emulators"].values())
            assert emulator_ports == list(range(base + 3, base + 3 + len(emulator_ports)))
            log = (stack.home / "logs" / "stack.log").read_text()
            assert f"port {base + 1} (api) is taken: using {state['api_port']} instead" in log
            # Issue 37 item 3: `local up` and `local status` say it too (only stack.log did), and where the truth is.
            moved = f"port {base + 1} (api) was taken by another process (another local stack?): listening on "
            for said in (stack.up_stderr, stack.cli("local", "status", check=True).stdout):
                assert f"{moved}{state['api_port']} instead" in said
                assert 'eval "$(omnireel local env)"' in said
                assert f"port {base} (" not in said  # the AWS port did not move
            assert stack.cli("status", "00000000-0000-0000-0000-000000000000").returncode == 2  # the API answers
        finally:
            left = stop_stack(stack)
    assert not left
