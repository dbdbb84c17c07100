"""The image endpoint's output check: a whole PNG (Pillow; no AWS). MP4 checks are in ``mp4``, the video reference
image in ``reference_image``."""

from __future__ import annotations

import io

from PIL import Image, UnidentifiedImageError

from omnireel.errors import MalformedModelOutput

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
