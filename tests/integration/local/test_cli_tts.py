"""`omnireel tts` against a scripted relay: the WAV it writes, and one clear error per way a session can go wrong.

The scripted relay is a real WebSocket server (websockets, on 127.0.0.1) that checks the bearer token and answers the
vLLM-Omni streaming-TTS events a test chooses; the real relay and emulator are covered by tests/e2e.
"""

from __future__ import annotations

import asyncio
import json
import threading
import wave
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from websockets.asyncio.server import serve

from omnireel_cli import smoke, tts
from omnireel_cli.errors import EXIT_INFRA, EXIT_JOB_FAILED, EXIT_USAGE, CliError
from omnireel_cli.main import main
from omnireel_cli.target import Target
from omnireel_local.home import free_port

TOKEN = "scripted-token"
PCM = bytes(range(256)) * 30  # 7680 bytes = 3840 samples


class ScriptedRelay:
    """Answers one utterance per connection according to ``self.mode``; records what the client sent."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.received: list[dict] = []
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}/v1/audio/speech/stream"
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ScriptedRelay:
        self._thread.start()
        assert self._started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive(), "the scripted relay did not stop"

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()

        def check_token(connection, request):
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                return connection.respond(HTTPStatus.UNAUTHORIZED, "unauthorized\n")
            return None

        async with serve(self._session, "127.0.0.1", self.port, process_request=check_token):
            self._started.set()
            await self._stop.wait()

    async def _session(self, ws) -> None:
        async for message in ws:
            event = json.loads(message)
            self.received.append(event)
            if event["type"] == "input.done":
                break
        mode = self.mode
        if mode == "hang":  # never answers; the handler ends when the client gives up and closes
            await ws.wait_closed()
            return
        if mode == "error":
            await ws.send(json.dumps({"type": "error", "message": "Speech generation failed: boom"}))
            await ws.close(1011)
            return
        start = {"type": "audio.start", "utterance_index": 0, "format": "pcm", "sample_rate": 24000}
        if mode == "no-rate":
            start.pop("sample_rate")
        elif mode == "16k":
            start["sample_rate"] = 16000
        await ws.send(json.dumps(start))
        if mode == "drop":
            await ws.send(PCM[:1000])
            await ws.close(1011, "upstream gone")
            return
        for offset in range(0, len(PCM), 999):  # odd chunk sizes: samples split across frames
            await ws.send(PCM[offset : offset + 999])
        total = len(PCM) + (2 if mode == "short" else 0)
        await ws.send(json.dumps({"type": "audio.done", "utterance_index": 0, "total_bytes": total}))
        await ws.send(json.dumps({"type": "session.done", "utterance_index": 0, "total_sentences": 1}))
        async for message in ws:
            self.received.append(json.loads(message))
            if json.loads(message)["type"] == "session.close":
                await ws.close(1000)


@pytest.fixture(scope="module")
def relay() -> Iterator[ScriptedRelay]:
    with ScriptedRelay() as server:
        yield server


def speak(relay: ScriptedRelay, out: Path, token: str = TOKEN, timeout: float = 10) -> tts.Speech:
    return tts.speak(tts.Relay(relay.url, token, "test"), "Hello there.", out, voice="vivian", language="English",
                     timeout=timeout)  # fmt: skip


def test_writes_a_24khz_mono_16bit_wav_and_speaks_the_protocol(relay: ScriptedRelay, tmp_path: Path) -> None:
    relay.mode, relay.received = "ok", []
    speech = speak(relay, tmp_path / "out.wav")
    with wave.open(str(tmp_path / "out.wav")) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        assert wav.readframes(wav.getnframes()) == PCM
    assert speech.bytes == len(PCM) and speech.frames == len(PCM) // 2
    assert 0 <= speech.time_to_first_audio_s < speech.total_s
    assert [e["type"] for e in relay.received] == [
        "session.config", "input.text", "input.done", "session.close",
    ]  # fmt: skip
    config = relay.received[0]
    assert config["response_format"] == "pcm" and config["stream_audio"] is True
    assert (config["voice"], config["language"]) == ("vivian", "English")
    assert list(tmp_path.iterdir()) == [tmp_path / "out.wav"]  # no partial file left behind


@pytest.mark.parametrize(
    ("mode", "code", "message"),
    [
        ("no-rate", EXIT_JOB_FAILED, "audio.start has no sample_rate"),
        ("16k", EXIT_JOB_FAILED, "sample_rate is 16000, expected 24000"),
        ("short", EXIT_JOB_FAILED, f"total_bytes is {len(PCM) + 2}, but {len(PCM)} bytes"),
        ("error", EXIT_JOB_FAILED, "the relay reported an error: Speech generation failed: boom"),
        ("drop", EXIT_INFRA, "closed the connection before the utterance finished (code 1011: upstream gone)"),
    ],
)
def test_a_bad_session_is_one_clear_error_and_no_file(relay: ScriptedRelay, tmp_path: Path, mode: str, code: int,
                                                      message: str) -> None:  # fmt: skip
    relay.mode = mode
    with pytest.raises(CliError) as raised:
        speak(relay, tmp_path / "out.wav")
    assert raised.value.code == code
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_wrong_token_unreachable_and_timeout(relay: ScriptedRelay, tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"refused the token \(HTTP 401\)") as raised:
        speak(relay, tmp_path / "a.wav", token="wrong")
    assert raised.value.code == EXIT_USAGE
    dead = tts.Relay(f"ws://127.0.0.1:{free_port()}/v1/audio/speech/stream", TOKEN, "test")
    with pytest.raises(CliError, match="is unreachable") as raised:
        tts.speak(dead, "hi", tmp_path / "b.wav", timeout=5)
    assert raised.value.code == EXIT_INFRA
    relay.mode = "hang"
    with pytest.raises(CliError, match="within 1 s") as raised:
        speak(relay, tmp_path / "c.wav", timeout=1)
    assert raised.value.code == EXIT_INFRA
    assert list(tmp_path.iterdir()) == []


@mock_aws
def test_deployed_stack_relay_url_and_token_from_the_secret(relay: ScriptedRelay, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    relay.mode = "ok"
    arn = boto3.client("secretsmanager", region_name="eu-west-1").create_secret(Name="relay", SecretString=TOKEN)["ARN"]
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {
            "ApiUrl": {"Value": "http://127.0.0.1:1"},
            "RelayUrl": {"Value": relay.url},
            "RelayTokenSecretArn": {"Value": arn},
        },
    }
    cfn = boto3.client("cloudformation", region_name="eu-west-1")
    cfn.create_stack(StackName="prod", TemplateBody=json.dumps(template))
    out = tmp_path / "speech.wav"
    assert main(["tts", "Hello.", "--stack", "prod", "--region", "eu-west-1", "--out", str(out)]) == 0
    assert "time to first audio" in capsys.readouterr().out
    assert out.stat().st_size == 44 + len(PCM)

    # No voice (EnableVoice=false): no RelayUrl output -> a clear error; smoke skips the TTS check.
    del template["Outputs"]["RelayUrl"], template["Outputs"]["RelayTokenSecretArn"]
    cfn.create_stack(StackName="quiet", TemplateBody=json.dumps(template))
    assert main(["tts", "Hello.", "--stack", "quiet", "--region", "eu-west-1", "--out", str(out)]) == EXIT_INFRA
    assert "stack quiet has no voice (EnableVoice=false)" in capsys.readouterr().err
    assert tts.relay_of(Target.deployed("quiet", "eu-west-1")) is None


def test_smoke_summary_verdicts() -> None:
    passed, failed, skipped = (smoke.Check("x", s, 1.0, "") for s in ("PASS", "FAIL", "SKIP"))
    assert smoke.summary([passed, passed, skipped], 2.0)[0] is True
    assert smoke.summary([passed, failed, skipped], 2.0)[0] is False
    assert smoke.summary([skipped], 2.0)[0] is False
    assert "smoke: FAIL (1 passed, 1 failed, 0 skipped)" in smoke.summary([passed, failed], 2.0)[1]
