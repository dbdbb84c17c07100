"""Small real images and videos for tests (made here, no files needed): used by the unit and the integration tests."""

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


def tiny_mp4(frames: int = 5, size: tuple[int, int] = (64, 48)) -> bytes:
    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            array = np.full((size[1], size[0], 3), i * 40 % 255, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(array, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()
