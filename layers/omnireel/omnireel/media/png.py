"""The image endpoint's output check: a whole PNG (a chunk walk, no AWS). MP4 checks are in ``mp4``, the video
reference image in ``reference_image``.

What Pillow's ``Image.open(...).verify()`` checked, without importing Pillow at GenerateImage's cold start (~0.04x of
the cold-start yardstick, and Pillow was the layer's only use of it): the PNG signature, an IHDR chunk first with a
non-zero size, every chunk whole and its CRC right, at least one IDAT, and an IEND. Like ``verify()``, it does not
decompress the pixels (libvips decodes them right after, for the video reference). ``tests/unit/media/test_media.py``
compares it with Pillow on whole, cut and damaged files.
"""

from __future__ import annotations

import struct
import zlib

from omnireel.core.errors import MalformedModelOutput

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png(data: bytes) -> tuple[int, int]:
    """Return (width, height) of a PNG, or raise ``MalformedModelOutput``."""
    if not data.startswith(PNG_SIGNATURE):
        raise MalformedModelOutput("the image endpoint returned data that is not a PNG")
    view, offset = memoryview(data), len(PNG_SIGNATURE)
    size: tuple[int, int] | None = None
    has_data = False
    while True:
        if offset + 8 > len(data):
            raise _corrupt("truncated before its IEND chunk")
        length, kind = struct.unpack_from(">I4s", data, offset)
        if kind == b"IEND" and size is not None:
            break  # as verify(): the end chunk's own bytes are not read
        end = offset + 12 + length
        if end > len(data):
            raise _corrupt(f"truncated in a {kind!r} chunk")
        (crc,) = struct.unpack_from(">I", data, end - 4)
        if crc != zlib.crc32(view[offset + 4 : end - 4]):  # over the chunk's type and data
            raise _corrupt(f"bad CRC in a {kind!r} chunk")
        if size is None:
            if kind != b"IHDR" or length != 13:
                raise _corrupt("no IHDR chunk first")
            size = struct.unpack_from(">II", data, offset + 8)
            if not all(size):
                raise _corrupt(f"zero size {size[0]}x{size[1]}")
        elif kind == b"IDAT":
            has_data = True
        offset = end
    if not has_data:
        raise _corrupt("no IDAT chunk")
    return size


def _corrupt(reason: str) -> MalformedModelOutput:
    return MalformedModelOutput(f"the image endpoint returned a corrupt PNG: {reason}")
