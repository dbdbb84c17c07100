"""The generated PNG's check and the video reference image (pure Pillow; no AWS). MP4 checks are in ``mp4``."""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from omnireel.errors import MalformedModelOutput, ReferenceTooLarge

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Starlette's default per-part cap for non-file multipart parts (vLLM-Omni 0.26.0 keeps the default).
MAX_TEXT_PART_BYTES = 1024 * 1024
JPEG_QUALITIES = (90, 80, 70, 60, 50, 40, 30)


def check_png(data: bytes) -> tuple[int, int]:
    """Return (width, height) of a PNG, or raise ``MalformedModelOutput``."""
    if not data.startswith(PNG_SIGNATURE):
        raise MalformedModelOutput("the image endpoint returned data that is not a PNG")
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
            return img.size
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise MalformedModelOutput(f"the image endpoint returned a corrupt PNG: {exc}") from exc


@dataclass(frozen=True)
class VideoReference:
    """The reference image as the container expects it: a JPEG data URL inside a JSON text part."""

    part_text: str  # {"image_url": "data:image/jpeg;base64,..."}
    jpeg_bytes: int
    quality: int

    @property
    def part_bytes(self) -> int:
        return len(self.part_text.encode())


def _fit(img: Image.Image, width: int, height: int) -> Image.Image:
    """Centre-crop to the target aspect ratio and resize in one pass (like ImageOps.fit)."""
    if img.mode not in ("RGB", "RGBA", "L"):
        img = img.convert("RGBA" if "A" in img.getbands() or img.mode == "P" else "RGB")
    src_w, src_h = img.size
    target = width / height
    box: tuple[float, float, float, float]
    if src_w / src_h > target:
        crop_w = src_h * target
        box = ((src_w - crop_w) / 2, 0, (src_w + crop_w) / 2, src_h)
    else:
        crop_h = src_w / target
        box = (0, (src_h - crop_h) / 2, src_w, (src_h + crop_h) / 2)
    # reducing_gap: a fast box reduction first, then Lanczos over the last factor of 3.
    fitted = img.resize((width, height), Image.Resampling.LANCZOS, box=box, reducing_gap=3.0)
    if fitted.mode == "RGBA":
        background = Image.new("RGB", fitted.size, (0, 0, 0))
        background.paste(fitted, mask=fitted.getchannel("A"))
        return background
    return fitted.convert("RGB")


def prepare_video_reference(
    png: bytes, width: int, height: int, *, max_part_bytes: int = MAX_TEXT_PART_BYTES
) -> VideoReference:
    """Fit the PNG to width x height, encode as JPEG and wrap it as the ``image_reference`` text part.

    The text part must stay within the container's per-part limit: the quality is lowered step by
    step until it fits, and ``ReferenceTooLarge`` is raised if even the lowest quality does not.
    """
    try:
        with Image.open(io.BytesIO(png)) as img:
            img.load()
            fitted = _fit(img, width, height)
    except (UnidentifiedImageError, OSError) as exc:
        raise MalformedModelOutput(f"cannot decode the generated image: {exc}") from exc
    for quality in JPEG_QUALITIES:
        buffer = io.BytesIO()
        fitted.save(buffer, format="JPEG", quality=quality)
        jpeg = buffer.getvalue()
        data_url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
        text = json.dumps({"image_url": data_url}, separators=(",", ":"))
        if len(text) <= max_part_bytes:
            return VideoReference(part_text=text, jpeg_bytes=len(jpeg), quality=quality)
    raise ReferenceTooLarge(
        f"a {width}x{height} reference image does not fit the container's {max_part_bytes}-byte "
        f"multipart text-part limit even at JPEG quality {JPEG_QUALITIES[-1]}"
    )
