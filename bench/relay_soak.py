"""Relay soak: many 5-minute voice sessions through the REAL relay process to the REAL uvicorn-served emulator.

    .venv/bin/python bench/relay_soak.py [--sessions 50] [--minutes 5] [--rtf 1]
        [--out docs/benchmarks/relay-soak.md | -]

Each session speaks for ``--minutes``: utterances of 40-1000 characters (every third session includes ~70 s
utterances, i.e. more than 60 s of audio each), alternately sent after the previous one finished (their time to
first audio is measured by the client) and *pipelined* (sent while the previous one is still streaming: the pattern
that used to end sessions with 1011 "keepalive ping timeout", issue 10 item 1). Then ``session.close``; any other
ending (error event, close code other than 1000, dropped connection) counts as an unexpected close. The relay's
resident memory is sampled every 5 s; its own TTFA figures come from its "session closed" log lines.

The emulator paces PCM at ``--rtf`` x real time (1 = real time, as a model would stream) and synthesises each
utterance before its first chunk (so its TTFA grows with the utterance length, unlike a streaming model).
Results replace the ``relay-soak`` section of docs/benchmarks/relay-soak.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from bench.report import emit, machine, quantile, today  # noqa: E402
from omnireel_local.home import free_port  # noqa: E402

TOKEN = "soak-token-0123456789abcdef"
CONFIG = json.dumps({"type": "session.config", "voice": "Vivian", "response_format": "pcm", "stream_audio": True})
WORDS = ["the", "relay", "keeps", "long", "voice", "sessions", "alive", "while", "a", "model", "streams", "speech"]
SAMPLE_RATE = 24000


def text_of(chars: int, rng: random.Random) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return (" ".join(out) + ".")[:chars]


def plan(session: int, rng: random.Random) -> list[int]:
    """Character counts of one cycle of utterances (~70 ms of audio per character)."""
    long = 1000 if session % 3 == 0 else 300  # 1000 characters = ~70 s of audio
    return [80, 300, long, 40, 150]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(argv: list[str], env: dict[str, str], ready: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(ready, timeout=2):  # noqa: S310 - loopback URL built here
                return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{argv[2]} did not start:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


async def one_session(index: int, url: str, seconds: float, start_delay: float) -> dict[str, Any]:
    rng = random.Random(index)
    await asyncio.sleep(start_delay)  # stagger the session starts
    cycle = plan(index, rng)
    result: dict[str, Any] = {"utterances": 0, "audio_s": [], "ttfa": [], "unexpected": None, "pipelined": 0}
    loop = asyncio.get_running_loop()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with connect(url, additional_headers=headers, max_size=None, open_timeout=60, close_timeout=10) as ws:
            await ws.send(CONFIG)
            end = loop.time() + seconds
            pending: list[dict[str, Any]] = []  # utterances sent and not yet finished, in order
            n = 0

            async def send(measure: bool) -> None:
                nonlocal n
                chars = cycle[n % len(cycle)]
                n += 1
                await ws.send(json.dumps({"type": "input.text", "text": text_of(chars, rng)}))
                pending.append({"sent": time.monotonic(), "measure": measure, "bytes": 0, "first": None})
                await ws.send('{"type": "input.done"}')

            await send(True)
            while pending:
                frame = await asyncio.wait_for(ws.recv(), 300)
                head = pending[0]
                if isinstance(frame, bytes):
                    if head["first"] is None:
                        head["first"] = time.monotonic()
                        if head["measure"]:
                            result["ttfa"].append(head["first"] - head["sent"])
                    head["bytes"] += len(frame)
                    # pipeline the next utterance 2 s into a measured one: a message arrives mid-stream
                    two_seconds_in = head["bytes"] >= 2 * SAMPLE_RATE * 2
                    if head["measure"] and len(pending) == 1 and two_seconds_in and loop.time() < end:
                        await send(False)
                        result["pipelined"] += 1
                    continue
                event = json.loads(frame)
                if event["type"] == "error":
                    result["unexpected"] = f"error event: {event.get('message')}"
                    return result
                if event["type"] == "session.done":
                    done = pending.pop(0)
                    result["utterances"] += 1
                    result["audio_s"].append(done["bytes"] / 2 / SAMPLE_RATE)
                    if not pending and loop.time() < end:
                        await asyncio.sleep(rng.uniform(0.2, 2.0))  # the listener's think time
                        await send(True)
            await ws.send('{"type": "session.close"}')
            await asyncio.wait_for(ws.wait_closed(), 15)
            if ws.close_code != 1000:
                result["unexpected"] = f"closed {ws.close_code} {ws.close_reason}"
    except (ConnectionClosed, TimeoutError, OSError) as exc:
        result["unexpected"] = f"{type(exc).__name__}: {exc}"
    return result


async def run_sessions(url: str, sessions: int, seconds: float) -> list[dict[str, Any]]:
    return await asyncio.gather(*(one_session(i, url, seconds, i * 10.0 / sessions) for i in range(sessions)))


def relay_ttfa_ms(log: Path) -> list[float]:
    out: list[float] = []
    for line in log.read_text(errors="replace").splitlines():
        if '"session closed"' in line:
            out += json.loads(line).get("ttfa_ms") or []
    return out


def main(args: argparse.Namespace) -> str:
    tmp = Path(tempfile.mkdtemp(prefix="relay-soak-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNIREEL_RELAY_", "OMNIREEL_EMULATOR_"))}
    env.pop("SM_VLLM_MODEL", None)
    env["PYTHONPATH"] = os.pathsep.join(str(REPO / p) for p in ("relay", "local", "layers/omnireel", "."))
    emulator_port, relay_port = free_port(), free_port()
    emulator = start(
        [sys.executable, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(emulator_port),
         "--routes", "speech", "--speech-realtime-factor", str(args.rtf), "--log-level", "warning"],
        env, f"http://127.0.0.1:{emulator_port}/health", tmp / "emulator.log",
    )  # fmt: skip
    relay_env = {
        **env,
        "OMNIREEL_RELAY_TOKEN": TOKEN,
        "OMNIREEL_RELAY_HOST": "127.0.0.1",
        "OMNIREEL_RELAY_PORT": str(relay_port),
        "OMNIREEL_RELAY_UPSTREAM_URL": f"ws://127.0.0.1:{emulator_port}/v1/audio/speech/stream",
        "OMNIREEL_RELAY_DRAIN_SECONDS": "1",
    }
    relay = start([sys.executable, "-m", "omnireel_relay"], relay_env, f"http://127.0.0.1:{relay_port}/healthz",
                  tmp / "relay.log")  # fmt: skip
    samples: list[tuple[float, int]] = []
    load: list[float] = []
    try:
        t0 = time.monotonic()
        cpu0 = (cpu_seconds(relay.pid), cpu_seconds(emulator.pid))

        async def sampler(stop_event: asyncio.Event) -> None:
            while not stop_event.is_set():
                samples.append((time.monotonic() - t0, rss_kib(relay.pid)))
                load.append(os.getloadavg()[0])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_event.wait(), 5)

        async def everything() -> list[dict[str, Any]]:
            stop_event = asyncio.Event()
            task = asyncio.create_task(sampler(stop_event))
            try:
                return await run_sessions(
                    f"ws://127.0.0.1:{relay_port}/v1/audio/speech/stream", args.sessions, args.minutes * 60
                )
            finally:
                stop_event.set()
                await task

        results = asyncio.run(everything())
        wall = time.monotonic() - t0
        cpu = ((cpu_seconds(relay.pid) - cpu0[0]) / wall, (cpu_seconds(emulator.pid) - cpu0[1]) / wall)
        request = urllib.request.Request(
            f"http://127.0.0.1:{relay_port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        deadline = time.monotonic() + 15  # the relay books a session's close just after the client saw it
        while True:
            with urllib.request.urlopen(request, timeout=5) as r:  # noqa: S310
                metrics = r.read().decode()
            if "omnireel_relay_active_sessions 0" in metrics or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        stop(relay)
        stop(emulator)
    relay_ttfa = relay_ttfa_ms(tmp / "relay.log")
    return report(args, results, samples, load, wall, cpu, metrics, relay_ttfa)


def report(args: argparse.Namespace, results: list[dict[str, Any]], samples: list[tuple[float, int]],
           load: list[float], wall: float, cpu: tuple[float, float], metrics: str,
           relay_ttfa: list[float]) -> str:  # fmt: skip
    ms = 1000.0
    unexpected = [r["unexpected"] for r in results if r["unexpected"]]
    ttfa = [t for r in results for t in r["ttfa"]]
    audio = [a for r in results for a in r["audio_s"]]
    utterances = sum(r["utterances"] for r in results)
    closes = Counter(
        line.split('code="')[1].split('"')[0]
        for line in metrics.splitlines()
        if line.startswith("omnireel_relay_closes_total{")
        for _ in range(int(float(line.split()[-1])))
    )
    errors = [line for line in metrics.splitlines() if line.startswith("omnireel_relay_errors_total{")]
    warm = [kib for t, kib in samples if t >= 30] or [kib for _, kib in samples]
    rss_start, rss_end, rss_max = warm[0] / 1024, warm[-1] / 1024, max(warm) / 1024
    half = len(warm) // 2
    first_half = sum(warm[:half]) / max(half, 1) / 1024
    second_half = sum(warm[half:]) / max(len(warm) - half, 1) / 1024
    lines = [
        "## TTS relay soak (bench/relay_soak.py)",
        "",
        f"Command: `.venv/bin/python bench/relay_soak.py --sessions {args.sessions} --minutes {args.minutes:g} "
        f"--rtf {args.rtf:g}`. Date: {today()}. Machine: {machine()}; shared with other work while it ran "
        f"(1-minute load average {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} CPUs).",
        "Stack: the relay process (`python -m omnireel_relay`, WebSocket upstream) in front of the container emulator "
        f"process (uvicorn, speech only, PCM paced at {args.rtf:g}x real time, 80 ms chunks), clients in this "
        "process; loopback.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| sessions x length | {len(results)} x {args.minutes:g} min (wall {wall:.0f} s) |",
        f"| unexpected closes (error event, close != 1000, dropped) | **{len(unexpected)}** |",
        f"| relay close codes | {dict(sorted(closes.items()))} |",
        f"| relay error counters | {', '.join(errors) if errors else 'none'} |",
        f"| utterances completed | {utterances} ({sum(r['pipelined'] for r in results)} of them sent while the "
        "previous one was still streaming) |",
        f"| audio streamed | {sum(audio) / 3600:.1f} h; longest utterance {max(audio, default=0):.1f} s; "
        f"{sum(1 for a in audio if a > 60)} utterances over 60 s |",
        f"| TTFA, client (input.done → first PCM frame, {len(ttfa)} utterances sent when idle) | "
        f"p50 **{quantile(ttfa, 0.5) * ms:.0f} ms**, p99 **{quantile(ttfa, 0.99) * ms:.0f} ms** |"
        if ttfa
        else "| TTFA | none measured |",
        f"| TTFA, relay's own log (all {len(relay_ttfa)} utterances, pipelined ones include their wait) | "
        f"p50 {quantile(relay_ttfa, 0.5):.0f} ms, p99 {quantile(relay_ttfa, 0.99):.0f} ms |"
        if relay_ttfa
        else "| TTFA, relay log | none |",
        f"| relay RSS after 30 s warm-up: first / last / max sample | {rss_start:.1f} / {rss_end:.1f} / "
        f"{rss_max:.1f} MiB (mean of first half {first_half:.1f}, second half {second_half:.1f} MiB; "
        f"{len(warm)} samples every 5 s) |",
        f"| CPU (of one core), relay / emulator | {cpu[0] * 100:.0f} % / {cpu[1] * 100:.0f} % |",
    ]
    if unexpected:
        lines += ["", "Unexpected endings: " + "; ".join(sorted(set(unexpected))[:5])]
    lines += [
        "",
        "TTFA here includes the emulator synthesising the *whole* utterance before its first chunk (up to ~0.4 s for "
        "the 1000-character ones, more while 50 sessions share the CPU), so it is an upper bound on the relay's part; "
        "`bench/relay_bench.py` isolates the relay's own added latency.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--rtf", type=float, default=1.0, help="emulator PCM pacing, x real time")
    parser.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "relay-soak.md"), help="'-' prints only")
    ns = parser.parse_args()
    emit("relay-soak", main(ns), ns.out)
