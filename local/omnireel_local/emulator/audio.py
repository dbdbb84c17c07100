"""Deterministic speech-like audio (24 kHz mono PCM16 LE) and its container encodings.

Not intelligible speech: each syllable is a voiced tone (a harmonic series shaped by two vowel formants) with a short
consonant noise burst and a smooth envelope; spaces and punctuation are pauses. Duration is about 70 ms per character
(divided by ``speed``), capped at ``MAX_SECONDS``. The voice name moves the pitch; the text decides everything else.
"""

from __future__ import annotations

import hashlib
import io
import wave
from collections.abc import Callable

import av
import numpy as np

SAMPLE_RATE = 24000
BYTES_PER_SAMPLE = 2
SECONDS_PER_CHAR = 0.07
MIN_SECONDS = 0.25
MAX_SECONDS = 180.0  # a real model stops at its max_new_tokens; long enough for > 60 s utterances (relay soak)
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg", "opus": "audio/ogg"}

_VOWEL_FORMANTS = {
    "a": (800.0, 1200.0),
    "e": (500.0, 1900.0),
    "i": (320.0, 2300.0),
    "o": (520.0, 900.0),
    "u": (350.0, 800.0),
    "y": (400.0, 2000.0),
}


class UnsupportedFormatError(ValueError):
    pass


def _digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")


def _units(text: str) -> list[tuple[str, int]]:
    """Split text into (syllable letters | "" for a pause, length in characters)."""
    units: list[tuple[str, int]] = []
    word = ""

    def flush() -> None:
        nonlocal word
        for start in range(0, len(word), 3):
            units.append((word[start : start + 3], len(word[start : start + 3])))
        word = ""

    for char in text:
        if char.isalnum() or char == "'":
            word += char.lower()
            continue
        flush()
        units.append(("", 1 if char.isspace() else 3))
    flush()
    return units


class SynthesisCancelled(Exception):
    """``should_stop`` answered True: the listener left, the rest of the utterance is not synthesised."""


CANCEL_CHECK_EVERY = 16  # units (syllables/pauses) between two ``should_stop`` calls


def synthesize(
    text: str, voice: str | None = None, speed: float = 1.0, should_stop: Callable[[], bool] | None = None
) -> np.ndarray:
    """int16 samples at 24 kHz, deterministic from (text, voice, speed).

    ``should_stop`` (called every few syllables, from whatever thread runs this) aborts the synthesis with
    :class:`SynthesisCancelled`: the emulator passes "has the client gone?" so abandoned utterances stop costing CPU.
    """
    units = _units(text.strip()) or [("", 1)]
    total_chars = sum(n for _, n in units)
    duration = min(max(total_chars * SECONDS_PER_CHAR / speed, MIN_SECONDS), MAX_SECONDS)
    samples_per_char = duration * SAMPLE_RATE / total_chars
    rng = np.random.default_rng(_digest("speech", voice or "", text))
    base_f0 = 95.0 + (_digest("voice", (voice or "default").lower()) % 130)
    out = np.zeros(round(duration * SAMPLE_RATE), dtype=np.float32)
    position = 0
    for index, (letters, chars) in enumerate(units):
        if should_stop is not None and index % CANCEL_CHECK_EVERY == 0 and should_stop():
            raise SynthesisCancelled(f"stopped after {index} of {len(units)} units")
        length = round(chars * samples_per_char)
        if letters and length > 8:
            progress = index / max(len(units) - 1, 1)
            segment = _syllable(letters, length, base_f0 * (1.08 - 0.16 * progress), rng)
            end = min(position + length, out.size)
            out[position:end] = segment[: end - position]
        position += length
    peak = float(np.max(np.abs(out))) or 1.0
    return (out / peak * 0.35 * 32767).astype(np.int16)


def _syllable(letters: str, length: int, f0: float, rng: np.random.Generator) -> np.ndarray:
    vowel = next((c for c in letters if c in _VOWEL_FORMANTS), None)
    if vowel is None:
        f1, f2 = 350.0 + 400.0 * rng.random(), 900.0 + 1200.0 * rng.random()
    else:
        f1, f2 = _VOWEL_FORMANTS[vowel]
    t = np.arange(length, dtype=np.float32) / SAMPLE_RATE
    glide = f0 * (1.0 + 0.06 * np.sin(np.pi * t / max(t[-1], 1e-3)) * (1 if rng.random() < 0.5 else -1))
    phase = 2 * np.pi * np.cumsum(glide) / SAMPLE_RATE
    harmonics = np.arange(1, max(2, int(4000 / f0)), dtype=np.float32)
    centre = harmonics * f0
    amps = np.exp(-(((centre - f1) / 160.0) ** 2)) + 0.6 * np.exp(-(((centre - f2) / 220.0) ** 2)) + 0.04 / harmonics
    voiced = (amps[:, None] * np.sin(harmonics[:, None] * phase[None, :])).sum(axis=0)
    attack, release = min(length // 4, 240), min(length // 3, 720)
    envelope = np.ones(length, dtype=np.float32)
    envelope[:attack] = np.linspace(0, 1, attack, dtype=np.float32)
    envelope[length - release :] = np.linspace(1, 0, release, dtype=np.float32)
    signal = voiced * envelope
    if letters[0] not in _VOWEL_FORMANTS:  # consonant onset: a short noise burst
        burst = min(length // 5, 480)
        signal[:burst] += rng.standard_normal(burst).astype(np.float32) * np.linspace(0.8, 0, burst) * amps.sum() * 0.3
    return signal.astype(np.float32)


def pcm_bytes(samples: np.ndarray) -> bytes:
    return samples.astype("<i2").tobytes()


def wav_bytes(samples: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(BYTES_PER_SAMPLE)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm_bytes(samples))
    return buf.getvalue()


_AV_FORMATS = {"flac": ("flac", "flac"), "mp3": ("mp3", "libmp3lame"), "opus": ("ogg", "libopus")}


def _av_bytes(samples: np.ndarray, response_format: str) -> bytes:
    container_format, codec = _AV_FORMATS[response_format]
    buf = io.BytesIO()
    with av.open(buf, mode="w", format=container_format) as container:
        stream = container.add_stream(codec, rate=SAMPLE_RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(samples.astype(np.int16)[None, :], format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = 0
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return buf.getvalue()


def encode_audio(samples: np.ndarray, response_format: str) -> bytes:
    if response_format == "wav":
        return wav_bytes(samples)
    if response_format == "pcm":
        return pcm_bytes(samples)
    if response_format in _AV_FORMATS:
        try:
            return _av_bytes(samples, response_format)
        except (av.FFmpegError, ValueError) as exc:
            raise UnsupportedFormatError(_unsupported(response_format)) from exc
    raise UnsupportedFormatError(_unsupported(response_format))


def _unsupported(response_format: str) -> str:
    return f"response_format '{response_format}' is not supported by the emulator"
