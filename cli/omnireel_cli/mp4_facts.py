"""What a downloaded MP4's video track says about itself: frame count, size and codec, read from its boxes (stdlib).

``omnireel demo`` prints these facts and ``omnireel smoke`` compares them with what the job asked for. They come
from the ISO-BMFF sample table (``stsz``/``trun`` sample counts, the ``stsd`` visual sample entry), not from decoding
the H.264 stream, so .venv needs no FFmpeg: PyAV lives only in the emulator's environment (.venv-emulator), and the
e2e tests decode the stack's MP4s frame by frame with it (tests/unit/cli/test_mp4_facts.py checks that both agree).
The top-level structure is checked first with the layer's own checks (``omnireel.media.mp4.check_mp4_boxes``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from omnireel.core.errors import MalformedModelOutput
from omnireel.media.mp4 import check_mp4_boxes

CODECS = {b"avc1": "h264", b"avc3": "h264", b"hvc1": "hevc", b"hev1": "hevc", b"av01": "av1", b"vp09": "vp9",
          b"mp4v": "mpeg4"}  # fmt: skip


@dataclass(frozen=True)
class VideoFacts:
    frames: int
    width: int
    height: int
    codec: str

    def __str__(self) -> str:
        return f"{self.frames} frames {self.width}x{self.height} {self.codec}"


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of each box in data[start:end]; raises on a box that overruns."""
    offset = start
    while offset + 8 <= end:
        size, kind, header = int.from_bytes(data[offset : offset + 4], "big"), data[offset + 4 : offset + 8], 8
        if size == 1:
            size, header = int.from_bytes(data[offset + 8 : offset + 16], "big"), 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            raise MalformedModelOutput(f"the MP4's {kind.decode('latin-1')!r} box overruns its parent")
        yield kind, offset + header, offset + size
        offset += size


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    return next(((s, e) for k, s, e in _boxes(data, start, end) if k == kind), None)


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


def video_facts(data: bytes) -> VideoFacts:
    """Facts of the first video track (``hdlr`` type ``vide``); MalformedModelOutput if there is none."""
    check_mp4_boxes(lambda offset, length: data[offset : offset + length], len(data))
    moov = _child(data, 0, len(data), b"moov")
    assert moov is not None  # check_mp4_boxes requires it
    for kind, start, end in _boxes(data, *moov):
        if kind != b"trak":
            continue
        mdia = _child(data, start, end, b"mdia")
        hdlr = mdia and _child(data, *mdia, b"hdlr")
        if not mdia or not hdlr or data[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        tkhd = _child(data, start, end, b"tkhd")
        stbl = (minf := _child(data, *mdia, b"minf")) and _child(data, *minf, b"stbl")
        stsd = stbl and _child(data, *stbl, b"stsd")
        stsz = stbl and _child(data, *stbl, b"stsz")
        if not (tkhd and stsd and stsz) or stsd[1] - stsd[0] < 8 + 36 or stsz[1] - stsz[0] < 12:
            raise MalformedModelOutput("the MP4's video track has no complete sample table")
        entry = stsd[0] + 8  # version/flags, entry_count; then the first sample entry (size, type, visual fields)
        fourcc = data[entry + 4 : entry + 8]
        width = int.from_bytes(data[entry + 32 : entry + 34], "big")
        height = int.from_bytes(data[entry + 34 : entry + 36], "big")
        frames = _u32(data, stsz[0] + 8)
        track_id = _u32(data, tkhd[0] + (20 if data[tkhd[0]] == 1 else 12))
        frames += _fragment_samples(data, track_id)
        return VideoFacts(frames, width, height, CODECS.get(fourcc, fourcc.decode("latin-1")))
    raise MalformedModelOutput("the MP4 has no video track")


def _fragment_samples(data: bytes, track_id: int) -> int:
    """Samples of a fragmented MP4 (``moof``/``traf``/``trun``) that belong to the track."""
    total = 0
    for kind, start, end in _boxes(data, 0, len(data)):
        if kind != b"moof":
            continue
        for traf_kind, traf_start, traf_end in _boxes(data, start, end):
            tfhd = _child(data, traf_start, traf_end, b"tfhd") if traf_kind == b"traf" else None
            if tfhd is None or _u32(data, tfhd[0] + 4) != track_id:
                continue
            total += sum(_u32(data, s + 4) for k, s, _ in _boxes(data, traf_start, traf_end) if k == b"trun")
    return total


def read_video_facts(path: Path) -> VideoFacts:
    return video_facts(path.read_bytes())
