"""`omnireel tts --open`: opens the relay page with the token in the URL fragment, never in what reaches a server.

The browser is the user's $BROWSER (Python's webbrowser honours it): here a recorder script, run by the real CLI.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from omnireel_cli import tts
from tests.support.omnireel_command import omnireel_command

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "tok/en+with=odd&chars_0123456789"


def _cli(*args: str, browser: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BROWSER": browser}
    argv = omnireel_command()
    return subprocess.run([*argv, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_open_passes_the_token_only_in_the_fragment(tmp_path: Path) -> None:
    seen = tmp_path / "url.txt"
    recorder = tmp_path / "browser.sh"
    recorder.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}\n')
    recorder.chmod(0o755)
    url = "ws://127.0.0.1:18080/v1/audio/speech/stream"
    result = _cli("tts", "--open", "--url", url, "--token", TOKEN, browser=f"{recorder} %s")
    assert result.returncode == 0, result.stderr
    opened = seen.read_text()
    page, _, fragment = opened.partition("#")
    assert page == "http://127.0.0.1:18080/"  # what the browser requests: no token in path or query
    assert fragment == "token=tok%2Fen%2Bwith%3Dodd%26chars_0123456789"
    assert TOKEN not in result.stdout and "tok%2Fen" not in result.stdout  # not echoed when a browser opened it
    assert "http://127.0.0.1:18080/" in result.stdout


def test_open_without_a_browser_prints_the_url_to_open(tmp_path: Path) -> None:
    result = _cli("tts", "--open", "--url", "wss://relay.example.com/v1/audio/speech/stream", "--token", TOKEN,
                  browser="false %s")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "https://relay.example.com/#token=tok%2Fen%2Bwith%3Dodd%26chars_0123456789" in result.stdout


def test_text_is_required_without_open() -> None:
    result = _cli("tts", "--url", "ws://127.0.0.1:1/v1/audio/speech/stream", "--token", TOKEN, browser="false %s")
    assert result.returncode == 2 and "--open" in result.stderr


@pytest.mark.parametrize(
    ("url", "page"),
    [
        ("ws://127.0.0.1:8080/v1/audio/speech/stream", "http://127.0.0.1:8080/"),
        ("wss://voice.example.com/v1/audio/speech/stream", "https://voice.example.com/"),
    ],
)
def test_page_url(url: str, page: str) -> None:
    assert tts.page_url(tts.Relay(url, TOKEN, "x")) == page
