"""Small real images for tests (made here, no files needed)."""

import io
import random

from PIL import Image


def png_bytes(width: int = 1024, height: int = 1024, *, noise: bool = False, mode: str = "RGB") -> bytes:
    if noise:
        rng = random.Random(1234)
        img = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    else:
        img = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    if mode != "RGB":
        img = img.convert(mode)
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()
