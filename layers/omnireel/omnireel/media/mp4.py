"""MP4 checks of the video endpoint's output: the ISO-BMFF signature and top-level box structure (stdlib only)."""

from __future__ import annotations

from collections.abc import Callable

from omnireel.core.errors import MalformedModelOutput


def check_mp4(head: bytes, size: int | None = None) -> None:
    """Check the ISO-BMFF signature (``ftyp`` box at offset 4) of an MP4."""
    if len(head) < 12 or head[4:8] != b"ftyp":
        raise MalformedModelOutput("the video endpoint's output is not an MP4 (no ftyp box)")
    if size is not None and size < 1024:
        raise MalformedModelOutput(f"the video endpoint's output is too small to be a video ({size} bytes)")


_MAX_TOP_LEVEL_BOXES = 256


def check_mp4_boxes(read_at: Callable[[int, int], bytes], size: int) -> None:
    """Walk the MP4's top-level ISO-BMFF boxes: each must fit in the file, and ``moov`` and ``mdat`` must be there.

    ``read_at(offset, length)`` returns bytes of the object (ranged reads: a video is a handful of boxes, so this
    is a few small reads, never the whole file). Catches truncated or cut-off output that still starts with ``ftyp``.
    """
    check_mp4(read_at(0, 16), size)
    offset, seen = 0, set()
    for _ in range(_MAX_TOP_LEVEL_BOXES):
        if offset >= size:
            break
        header = read_at(offset, 16)
        if len(header) < 8:
            raise MalformedModelOutput("the video endpoint's output is truncated (partial box header)")
        box_size, kind, header_size = int.from_bytes(header[:4], "big"), header[4:8], 8
        if box_size == 1:  # 64-bit size follows the type
            if len(header) < 16:
                raise MalformedModelOutput("the video endpoint's output is truncated (partial box header)")
            box_size, header_size = int.from_bytes(header[8:16], "big"), 16
        elif box_size == 0:  # the box runs to the end of the file
            box_size = size - offset
        if box_size < header_size or offset + box_size > size:
            name = kind.decode("latin-1", "replace")
            raise MalformedModelOutput(f"the video endpoint's output is truncated (the {name!r} box overruns the file)")
        seen.add(kind)
        offset += box_size
    else:
        raise MalformedModelOutput("the video endpoint's output has too many top-level boxes to be a video")
    missing = sorted(m.decode() for m in {b"moov", b"mdat"} - seen)
    if missing:
        raise MalformedModelOutput(f"the video endpoint's output has no {' or '.join(missing)} box")


BLOCK_BYTES = 65536


def block_reader(
    read_at: Callable[[int, int], bytes], block: int = BLOCK_BYTES, first: bytes | None = None
) -> Callable[[int, int], bytes]:
    """``read_at`` served from ``block``-aligned reads, each made once: the box walk's header reads of a short video
    (``ftyp``, ``moov``, the ``mdat`` header) then cost one ranged GET instead of one each. ``first``: block 0, when
    the caller has read it already (with the object's size)."""
    blocks: dict[int, bytes] = {} if first is None else {0: first}

    def read(offset: int, length: int) -> bytes:
        out = b""
        for index in range(offset // block, (offset + length - 1) // block + 1):
            if index not in blocks:
                blocks[index] = read_at(index * block, block)
            out += blocks[index]
        start = offset - (offset // block) * block
        return out[start : start + length]

    return read
