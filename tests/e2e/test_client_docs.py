"""Issue 28: the client installs from this checkout into a fresh Python 3.10+ virtual environment (``pip install
./client``, as docs/client.md says), and every example of docs/client.md runs there against the local stack.

The examples are read from the page (each ``<!-- example: NAME -->`` before a python block), so the page and the test
cannot drift: an example added to the page runs here too (and must say what it proves below, or the test fails)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omnireel_local.home import free_port as _free_port
from tests.support.client_venv import client_venv
from tests.support.stack import ROOT, LocalStack

from .helpers import wait_for
from .test_webhook_tenants import (
    polled_secret_view,
    quick_key_pickup,  # noqa: F401 - the fixture (a rotation takes effect after 5 s, then restored)
)

DOC = ROOT / "docs" / "client.md"
EXAMPLE = re.compile(r"<!-- example: (?P<name>[a-z_]+) -->\s*```python\n(?P<code>.*?)```", re.S)
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 180
# What each example's output must contain (the examples print what they did).
EXPECTED = {
    # The first poll sees the job wherever it is by then (a stage before the end), then each later stage once.
    "submit_and_wait": [
        r"\b[0-9a-f]{8} (accepted|generating_image|staging_video|rendering_video)\n",
        r"[0-9a-f]{8} succeeded",
        r"video: \S+video\.mp4 \d+ bytes",
    ],
    "errors": ["400 InvalidRequest", "  prompt: ", "  video.num_frames: ", "  video.width: "],
    "paging_and_cancel": [r"cancelled - ", r"on the first page; more: (True|False)"],
    "async_batch": [r"completed: 3/3 started, 3/3 done", r"succeeded 3 failed 0", r"manifest http"],
    "send_to_receiver": [r"submitted [0-9a-f-]{36}"],
    "receiver": [],  # run by uvicorn: test_the_webhook_receiver_verifies_a_real_delivery
}


def _examples() -> dict[str, str]:
    return {m["name"]: m["code"] for m in EXAMPLE.finditer(DOC.read_text())}


def _oldest_python() -> str:
    """The oldest Python >= 3.10 on this machine (the client's floor): pyenv's 3.10, else python3.10/3.11, else ours."""
    candidates = sorted(Path.home().glob(".pyenv/versions/3.1[0-9]*/bin/python"))
    for found in [*map(str, candidates), "python3.10", "python3.11", "/usr/bin/python3"]:
        path = shutil.which(found) or (found if Path(found).is_file() else None)
        if path is None:
            continue
        version = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2] >= (3, 10))"],
                                 capture_output=True, text=True, timeout=30)  # fmt: skip
        if version.stdout.strip() == "True":
            return path
    return sys.executable


@pytest.fixture(scope="module")
def venv() -> Path:
    """A fresh virtual environment with ``pip install ./client`` (and uvicorn for the receiver example) only: made once
    per set of inputs and kept while none changes (tests/support/client_venv.py)."""
    constraints = ROOT / "requirements" / "constraints.txt"
    uvicorn = next(line for line in constraints.read_text().splitlines() if line.startswith("uvicorn=="))
    install = ["-m", "pip", "install", "--disable-pip-version-check", "-q", str(ROOT / "client"), uvicorn]
    return client_venv(_oldest_python(), install, timeout_s=INSTALL_TIMEOUT_S)


def _run(venv: Path, stack: LocalStack, workdir: Path, code: str, env: dict[str, str] | None = None) -> str:
    script = workdir / "example.py"
    script.write_text(code)
    environment = {"PATH": os.environ["PATH"], "OMNIREEL_HOME": str(stack.home), **(env or {})}
    done = subprocess.run([str(venv), str(script)], cwd=workdir, env=environment, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_installed_client_is_the_checkout_typed_and_on_an_old_python(venv: Path, tmp_path: Path) -> None:
    code = (
        "import sys, pathlib, omnireel_client\n"
        "print(sys.version_info[:2]); print(pathlib.Path(omnireel_client.__file__).parent)\n"
        "print((pathlib.Path(omnireel_client.__file__).parent / 'py.typed').is_file())\n"
    )
    done = subprocess.run([str(venv), "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    version, where, typed = done.stdout.splitlines()
    assert eval(version) >= (3, 10)  # noqa: S307 - a tuple this test printed
    assert "site-packages" in where and typed == "True"  # installed, not imported from the checkout


def test_every_example_is_checked() -> None:
    assert set(_examples()) == set(EXPECTED), "an example on docs/client.md needs its expectation here"


@pytest.mark.parametrize("name", [n for n in EXPECTED if n not in ("receiver", "send_to_receiver")])
def test_the_example_runs(name: str, venv: Path, stack: LocalStack, tmp_path: Path) -> None:
    output = _run(venv, stack, tmp_path, _examples()[name])
    for expected in EXPECTED[name]:
        assert re.search(expected, output), f"{expected!r} not in:\n{output}"
    # on_progress fires when something changed: a progress line never repeats the one before it (issue 37 item 6:
    # the batch example printed "0/3 done" twice, its line leaving out what had changed).
    lines = output.splitlines()
    assert all(a != b for a, b in itertools.pairwise(lines)), output
    if name == "submit_and_wait":
        videos = list((tmp_path / "out").glob("*/video.mp4"))
        assert len(videos) == 1 and videos[0].read_bytes()[4:8] == b"ftyp"


@pytest.fixture
def receiver(venv: Path, stack: LocalStack, tmp_path: Path) -> Iterator[tuple[int, list[str]]]:
    with _receiver(venv, stack, tmp_path, _examples()["receiver"]) as started:
        yield started


DOC_REFRESH = "refresh_interval_s=60"  # the receiver example's: a refused delivery re-reads the secret after 60 s
QUICK_REFRESH = "refresh_interval_s=3"


@pytest.fixture
def rotating_receiver(venv: Path, stack: LocalStack, tmp_path: Path) -> Iterator[tuple[int, list[str]]]:
    """The receiver example as documented but for its refresh interval, 3 s instead of 60: with the stack's rotation
    taking effect after 5 s (quick_key_pickup), the documented 60 s would make the test wait out the interval."""
    code = _examples()["receiver"]
    assert code.count(DOC_REFRESH) == 1, "the receiver example's refresh interval changed: update DOC_REFRESH"
    with _receiver(venv, stack, tmp_path, code.replace(DOC_REFRESH, QUICK_REFRESH)) as started:
        yield started


@contextlib.contextmanager
def _receiver(venv: Path, stack: LocalStack, tmp_path: Path, code: str) -> Iterator[tuple[int, list[str]]]:
    (tmp_path / "receiver.py").write_text(code)
    port = _free_port()
    process = subprocess.Popen(
        [str(venv.parent / "uvicorn"), "receiver:app", "--port", str(port), "--lifespan", "off"],
        cwd=tmp_path, env={"PATH": os.environ["PATH"], "OMNIREEL_HOME": str(stack.home)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True).start()  # type: ignore[union-attr]
    try:
        wait_for(lambda: any("Uvicorn running" in line for line in lines) or process.poll() is not None, 30, "uvicorn")
        assert process.poll() is None, "".join(lines)
        yield port, lines
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_webhook_receiver_verifies_a_real_delivery(receiver: tuple[int, list[str]], venv: Path,
                                                      stack: LocalStack, tmp_path: Path) -> None:  # fmt: skip
    port, lines = receiver
    output = _run(venv, stack, tmp_path, _examples()["send_to_receiver"], {"PORT": str(port)})
    job_id = re.search(r"submitted ([0-9a-f-]{36})", output)[1]  # type: ignore[index]
    wait_for(lambda: any(f"verified job.succeeded {job_id}" in line for line in lines), RUN_TIMEOUT_S,
             f"the receiver to verify job.succeeded of {job_id}")  # fmt: skip
    assert not any(" 401 " in line for line in lines)  # every delivery verified


def test_the_receiver_picks_up_a_rotation_without_a_restart(quick_key_pickup: None,  # noqa: F811 - the fixture
                                                            rotating_receiver: tuple[int, list[str]], venv: Path,
                                                            stack: LocalStack, tmp_path: Path) -> None:  # fmt: skip
    """Issue 33 item 3: the receiver of docs/client.md, started before the rotation, verifies a delivery signed with
    the new key only (``rotate --grace-hours 0``, as for a leaked key, once the old key has stopped signing): it reads
    the secret again by itself."""
    port, lines = rotating_receiver

    def view() -> dict[str, Any]:
        return dict(json.loads(stack.cli("webhooks", "secret", "--json", check=True).stdout))

    before = view()["secret"]
    stack.cli("webhooks", "rotate", "--grace-hours", "0", check=True)
    # The old key may sign alone until every function has read the rotation (item 9); from previous_until, only the
    # new one does. A delivery made after that cannot verify with the secret the receiver read at its start.
    # polled in-process (a CLI process per poll burnt a core), checked by the CLI
    wait_for(lambda: (v := polled_secret_view(stack))["secret"] != before and v["previous_secret"] is None, 120,
             "the old key to stop signing")  # fmt: skip
    assert view()["previous_secret"] is None
    output = _run(venv, stack, tmp_path, _examples()["send_to_receiver"], {"PORT": str(port)})
    job_id = re.search(r"submitted ([0-9a-f-]{36})", output)[1]  # type: ignore[index]
    # A delivery that arrives less than refresh_interval_s (3 s here) after the receiver's first read is refused (401)
    # and retried by the stack 30 s later; the receiver has read the new secret by then.
    wait_for(lambda: any(f"verified job.succeeded {job_id}" in line for line in lines), RUN_TIMEOUT_S,
             f"the receiver to verify job.succeeded of {job_id} after the rotation")  # fmt: skip
