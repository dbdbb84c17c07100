"""Process-wide relay metrics, rendered as Prometheus text at ``/metrics`` (and optional CloudWatch EMF lines)."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from .logging import emit_raw, now_ms

TTFA_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = TTFA_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(TTFA_BUCKETS) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1


@dataclass
class Metrics:
    active_sessions: int = 0
    sessions_total: int = 0
    utterances_total: int = 0
    audio_bytes_total: int = 0
    audio_chunks_total: int = 0
    client_messages_total: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # by reason
    closes: Counter[int] = field(default_factory=Counter)  # by close code
    rejected: Counter[str] = field(default_factory=Counter)  # handshakes refused, by reason
    ttfa: Histogram = field(default_factory=Histogram)
    draining: bool = False

    def render_prometheus(self) -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

        metric("omnireel_relay_active_sessions", "gauge", "Open client sessions.", [("", self.active_sessions)])
        metric("omnireel_relay_draining", "gauge", "1 while draining after SIGTERM.", [("", int(self.draining))])
        metric("omnireel_relay_sessions_total", "counter", "Sessions accepted.", [("", self.sessions_total)])
        metric("omnireel_relay_utterances_total", "counter", "Utterances flushed.", [("", self.utterances_total)])
        metric("omnireel_relay_audio_bytes_total", "counter", "PCM bytes sent.", [("", self.audio_bytes_total)])
        metric("omnireel_relay_audio_chunks_total", "counter", "Audio frames sent.", [("", self.audio_chunks_total)])
        metric(
            "omnireel_relay_client_messages_total",
            "counter",
            "Client events forwarded.",
            [("", self.client_messages_total)],
        )
        metric(
            "omnireel_relay_errors_total",
            "counter",
            "Errors by reason.",
            [(f'{{reason="{k}"}}', v) for k, v in sorted(self.errors.items())],
        )
        metric(
            "omnireel_relay_closes_total",
            "counter",
            "Sessions closed, by close code.",
            [(f'{{code="{k}"}}', v) for k, v in sorted(self.closes.items())],
        )
        metric(
            "omnireel_relay_rejected_total",
            "counter",
            "Handshakes refused, by reason.",
            [(f'{{reason="{k}"}}', v) for k, v in sorted(self.rejected.items())],
        )
        name = "omnireel_relay_time_to_first_audio_seconds"
        lines.append(f"# HELP {name} From input.done to the first audio frame sent to the client.")
        lines.append(f"# TYPE {name} histogram")
        cumulative = 0
        for bound, count in zip((*self.ttfa.buckets, float("inf")), self.ttfa.counts, strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            lines.append(f'{name}_bucket{{le="{le}"}} {cumulative}')
        lines.append(f"{name}_sum {self.ttfa.total:g}")
        lines.append(f"{name}_count {self.ttfa.n}")
        return "\n".join(lines) + "\n"


def emit_emf(namespace: str, session_id: str, ttfa_ms: list[float], audio_bytes: int, chunks: int, code: int) -> None:
    """One CloudWatch Embedded Metric Format line per finished session."""
    emit_raw(
        {
            "_aws": {
                "Timestamp": now_ms(),
                "CloudWatchMetrics": [
                    {
                        "Namespace": namespace,
                        "Dimensions": [[]],
                        "Metrics": [
                            {"Name": "TimeToFirstAudio", "Unit": "Milliseconds"},
                            {"Name": "AudioBytes", "Unit": "Bytes"},
                            {"Name": "AudioChunks", "Unit": "Count"},
                            {"Name": "Sessions", "Unit": "Count"},
                        ],
                    }
                ],
            },
            "TimeToFirstAudio": ttfa_ms,
            "AudioBytes": audio_bytes,
            "AudioChunks": chunks,
            "Sessions": 1,
            "session_id": session_id,
            "close_code": code,
        }
    )
