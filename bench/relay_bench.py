"""Relay benchmark: added time to first audio, and concurrent real-time 24 kHz streams on one core.

    .venv/bin/python bench/relay_bench.py [--ttfa-runs 200] [--streams 200,400] [--seconds 5]

The relay runs as its own process (``python -m omnireel_relay``) pinned to CPU 0; the fake vLLM-Omni upstream
(tests/support/relay/fake_tts_upstream.py) and the clients run in this process, pinned to the other CPUs. Loopback only.
Results replace the 'relay' section of docs/benchmarks/relay.md (``--out FILE`` for another file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "relay"))

from websockets.asyncio.client import connect  # noqa: E402

from omnireel_local.home import free_port as _free_port  # noqa: E402
from tests.support.relay.fake_tts_upstream import FakeTTS  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
CONFIG = json.dumps({"type": "session.config", "voice": "Vivian", "response_format": "pcm", "stream_audio": True})
CHUNK_SAMPLES = 2400  # 100 ms of 24 kHz PCM16 per chunk
CHUNK_SECONDS = CHUNK_SAMPLES / 24000


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def start_relay(upstream_url: str, cpu: int, max_sessions: int) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OMNIREEL_RELAY_")},
        "PYTHONPATH": str(REPO / "relay"),
        "OMNIREEL_RELAY_TOKEN": TOKEN,
        "OMNIREEL_RELAY_HOST": "127.0.0.1",
        "OMNIREEL_RELAY_PORT": str(port),
        "OMNIREEL_RELAY_UPSTREAM_URL": upstream_url,
        "OMNIREEL_RELAY_MAX_SESSIONS": str(max_sessions),
        "OMNIREEL_RELAY_DRAIN_SECONDS": "1",
        "OMNIREEL_RELAY_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen([sys.executable, "-m", "omnireel_relay"], env=env, stdout=subprocess.DEVNULL)
    os.sched_setaffinity(proc.pid, {cpu})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("relay did not start")


class FakeProc:
    """The fake upstream in its own process, so 'direct' and 'relayed' both cross process boundaries."""

    def __init__(self, chunks: int, interval: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-fake", f"{chunks}:{interval}"], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    async def start(self) -> str:
        return self.url

    async def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def serve_fake(spec: str) -> None:
    chunks, interval = spec.split(":")
    fake = FakeTTS(chunks=int(chunks), chunk_samples=CHUNK_SAMPLES, interval=float(interval))
    print(await fake.start(), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await fake.stop()


def relay_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def utterance(ws, text: str = "bench") -> tuple[float, list[tuple[float, int]], dict]:  # type: ignore[no-untyped-def]
    """Returns (ttfa seconds, [(arrival, seq)], audio.done)."""
    await ws.send(json.dumps({"type": "input.text", "text": text}))
    t0 = time.perf_counter()
    await ws.send('{"type": "input.done"}')
    ttfa = None
    arrivals: list[tuple[float, int]] = []
    while True:
        f = await ws.recv()
        if isinstance(f, bytes):
            now = time.perf_counter()
            if ttfa is None:
                ttfa = now - t0
            arrivals.append((now, struct.unpack_from("<I", f)[0]))
            continue
        ev = json.loads(f)
        if ev["type"] == "audio.done":
            done = ev
        elif ev["type"] == "session.done":
            return ttfa or 0.0, arrivals, done
        elif ev["type"] == "error":
            raise RuntimeError(ev)


async def ttfa_series(url: str, headers: dict[str, str], runs: int) -> list[float]:
    out = []
    async with connect(url, additional_headers=headers, compression=None, max_size=None) as ws:
        await ws.send(CONFIG)
        for _ in range(runs):
            ttfa, _, _ = await utterance(ws)
            out.append(ttfa)
    return out


async def concurrent(url: str, headers: dict[str, str], streams: int) -> dict[str, object]:
    async def one(i: int) -> dict[str, object]:
        await asyncio.sleep((i % 100) * CHUNK_SECONDS / 100)  # spread stream starts over one chunk period
        async with connect(url, additional_headers=headers, compression=None, max_size=None, open_timeout=30) as ws:
            await ws.send(CONFIG)
            _, arrivals, done = await utterance(ws)
        seqs = [s for _, s in arrivals]
        t_first = arrivals[0][0]
        lateness = [t - (t_first + k * CHUNK_SECONDS) for k, (t, _) in enumerate(arrivals)]
        return {
            "ok_order": seqs == list(range(len(seqs))),
            "chunks": len(seqs),
            "bytes_ok": done["total_bytes"] == len(seqs) * CHUNK_SAMPLES * 2,
            "max_late": max(lateness),
        }

    results = await asyncio.gather(*(one(i) for i in range(streams)), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    good = [r for r in results if isinstance(r, dict)]
    return {
        "streams": streams,
        "failed": len(failures),
        "first_failure": repr(failures[0]) if failures else "",
        "reordered_or_dropped": sum(1 for r in good if not r["ok_order"] or not r["bytes_ok"]),
        "chunks": sum(int(r["chunks"]) for r in good),
        "max_late_p50": pct([float(r["max_late"]) for r in good], 0.5) if good else float("nan"),
        "max_late_max": max(float(r["max_late"]) for r in good) if good else float("nan"),
    }


async def main(args: argparse.Namespace) -> str:
    cpus = sorted(os.sched_getaffinity(0))
    relay_cpu = cpus[0]
    if len(cpus) > 1:
        os.sched_setaffinity(0, set(cpus[1:]))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    levels = [int(x) for x in args.streams.split(",")]

    # --- TTFA: no pacing, first chunk immediately, so the difference is the relay's own cost -------------------
    fake = FakeProc(chunks=3, interval=0.0)
    direct_url = await fake.start()
    proc, port = start_relay(direct_url, relay_cpu, max(levels) + 10)
    relay_url = f"ws://127.0.0.1:{port}/v1/audio/speech/stream"
    try:
        await ttfa_series(relay_url, headers, 20)  # warm-up
        await ttfa_series(direct_url, {}, 20)
        direct: list[float] = []
        relayed: list[float] = []
        for _ in range(4):  # interleave to share any drift
            direct += await ttfa_series(direct_url, {}, args.ttfa_runs // 4)
            relayed += await ttfa_series(relay_url, headers, args.ttfa_runs // 4)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        await fake.stop()

    # --- concurrency: real-time pacing, 100 ms chunks ---------------------------------------------------------
    conc = []
    for n in levels:
        fake = FakeProc(chunks=int(args.seconds / CHUNK_SECONDS), interval=CHUNK_SECONDS)
        direct_url = await fake.start()
        proc, port = start_relay(direct_url, relay_cpu, n + 10)
        relay_url = f"ws://127.0.0.1:{port}/v1/audio/speech/stream"
        try:
            cpu0, t0 = relay_cpu_seconds(proc.pid), time.monotonic()
            res = await asyncio.wait_for(concurrent(relay_url, headers, n), args.seconds * 4 + 30)
            res["relay_cpu"] = (relay_cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
            conc.append(res)
            print(json.dumps(res), flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
            await fake.stop()

    ms = 1000.0
    added = [r - d for r, d in zip(sorted(relayed), sorted(direct), strict=False)]
    lines = [
        "## TTS relay (bench/relay_bench.py)",
        "",
        f"Command: `.venv/bin/python bench/relay_bench.py --ttfa-runs {args.ttfa_runs} --streams {args.streams} "
        f"--seconds {args.seconds:g}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"relay process pinned to CPU {relay_cpu}; the fake upstream (own process) and the clients on the other "
        "CPU(s); loopback; fake vLLM-Omni upstream (tests/support/relay/fake_tts_upstream.py) — "
        "no model, so these numbers are the relay's own cost.",
        "",
        "### Time to first audio (input.done → first PCM frame), first chunk produced immediately",
        "",
        "| path | runs | p50 ms | p95 ms |",
        "|---|---|---|---|",
        f"| direct to upstream | {len(direct)} | {pct(direct, 0.5) * ms:.2f} | {pct(direct, 0.95) * ms:.2f} |",
        f"| through relay | {len(relayed)} | {pct(relayed, 0.5) * ms:.2f} | {pct(relayed, 0.95) * ms:.2f} |",
        f"| **added by relay** (quantile difference) | | **{(pct(relayed, 0.5) - pct(direct, 0.5)) * ms:.2f}** | "
        f"**{(pct(relayed, 0.95) - pct(direct, 0.95)) * ms:.2f}** |",
        "",
        f"Target: added p50 ≤ 5 ms → {'met' if (pct(relayed, 0.5) - pct(direct, 0.5)) * ms <= 5 else 'NOT met'}. "
        f"(Median of sorted pairwise differences: {statistics.median(added) * ms:.2f} ms.)",
        "",
        f"### Concurrent real-time streams (24 kHz PCM16, 100 ms chunks paced in real time, {args.seconds:g} s each)",
        "",
        "| streams | failed | dropped/reordered | chunks | relay CPU (of 1 core) | worst lateness p50 / max ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in conc:
        lines.append(
            f"| {r['streams']} | {r['failed']} | {r['reordered_or_dropped']} | {r['chunks']} | "
            f"{float(r['relay_cpu']) * 100:.0f} % | "
            f"{float(r['max_late_p50']) * ms:.1f} / {float(r['max_late_max']) * ms:.1f} |"
        )
    lines += [
        "",
        "Lateness = how far the k-th chunk arrived behind `first + k * 100 ms` (includes the fake upstream's and the "
        "clients' scheduling on the shared CPU). A stream is sustained when no chunk is dropped or reordered, "
        "`total_bytes` matches and lateness stays well under a jitter buffer (about 100-200 ms).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttfa-runs", type=int, default=200)
    parser.add_argument("--streams", default="200,400")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "relay.md"))
    parser.add_argument("--serve-fake", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve_fake:
        asyncio.run(serve_fake(ns.serve_fake))
        sys.exit(0)
    report = asyncio.run(main(ns))
    from bench.report import write_section

    write_section("relay", report, Path(ns.out))
    print(report)
