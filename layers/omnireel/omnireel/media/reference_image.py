"""The video reference image: the generated PNG fitted to the video size, as a JPEG data URL (libvips).

The AWS sample does this with Pillow (``convert("RGB")`` -> ``ImageOps.fit`` LANCZOS -> JPEG q90). libvips does the
same centre-crop Lanczos-3 fit at equal quality about 2x faster (docs/benchmarks.md, "Video request preparation"):
it decodes the PNG row by row straight into the resampler (sequential access) instead of materialising the whole
1024x1024 image first. There is no Pillow fallback on purpose: the pinned ``pyvips-binary`` wheels exist for the
layer's architecture and for the local venv, and a second, untested path would stage different bytes.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pyvips

from omnireel.core.errors import MalformedModelOutput, ReferenceTooLarge

# Starlette's default per-part cap for non-file multipart parts (vLLM-Omni 0.26.0 keeps the default).
MAX_TEXT_PART_BYTES = 1024 * 1024
JPEG_QUALITIES = (90, 80, 70, 60, 50, 40, 30)

# One worker thread: a step Lambda has about half a vCPU, so libvips' thread pool only adds hand-offs. Operation cache
# off: every call sees new bytes, so cached operations would only hold memory in a warm Lambda.
pyvips.concurrency_set(1)
pyvips.cache_set_max(0)


@dataclass(frozen=True)
class VideoReference:
    """The reference image as the container expects it: a JPEG data URL inside a JSON text part."""

    part_text: str  # {"image_url": "data:image/jpeg;base64,..."}
    jpeg_bytes: int
    quality: int

    @property
    def part_bytes(self) -> int:
        return len(self.part_text.encode())


def fit(png: bytes, width: int, height: int) -> pyvips.Image:
    """Centre-crop to the target aspect ratio and Lanczos-3 resize to width x height (like ``ImageOps.fit``).

    Decodes only PNG (no other loader is reachable from model output) and fails on any decode error. The result is
    rendered to memory, so it can be encoded more than once.
    """
    image = pyvips.Image.pngload_buffer(png, access="sequential", fail_on="error")
    if image.hasalpha():  # transparent areas become black, as before
        image = image.flatten(background=[0])
    if image.interpretation != "srgb" or image.format != "uchar" or image.bands != 3:
        image = image.colourspace("srgb")  # grey, 16-bit, palette -> 8-bit sRGB
    # Scale so the image covers the target, then cut the centre: the same box ImageOps.fit resamples.
    image = image.resize(max(width / image.width, height / image.height), kernel="lanczos3")
    left, top = (image.width - width) // 2, (image.height - height) // 2
    return image.extract_area(left, top, width, height).copy_memory()


def encode_jpeg(image: pyvips.Image, quality: int) -> bytes:
    """Baseline JPEG, 4:2:0 chroma forced (libvips would keep full chroma at Q >= 90; Pillow and the sample use
    4:2:0), optimised Huffman tables like the sample's ``optimize=True``, no metadata."""
    return image.jpegsave_buffer(Q=quality, subsample_mode="on", optimize_coding=True, keep=0)


def prepare_video_reference(
    png: bytes, width: int, height: int, *, max_part_bytes: int = MAX_TEXT_PART_BYTES
) -> VideoReference:
    """Fit the PNG to width x height, encode as JPEG and wrap it as the ``image_reference`` text part.

    The text part must stay within the container's per-part limit: the quality is lowered step by
    step until it fits, and ``ReferenceTooLarge`` is raised if even the lowest quality does not.
    """
    try:
        fitted = fit(png, width, height)
    except pyvips.Error as exc:
        detail = " ".join(str(exc.detail or exc.message).split())[:300]
        raise MalformedModelOutput(f"cannot decode the generated image: {detail}") from exc
    for quality in JPEG_QUALITIES:
        jpeg = encode_jpeg(fitted, quality)
        data_url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
        text = json.dumps({"image_url": data_url}, separators=(",", ":"))
        if len(text) <= max_part_bytes:
            return VideoReference(part_text=text, jpeg_bytes=len(jpeg), quality=quality)
    raise ReferenceTooLarge(
        f"a {width}x{height} reference image does not fit the container's {max_part_bytes}-byte "
        f"multipart text-part limit even at JPEG quality {JPEG_QUALITIES[-1]}"
    )
