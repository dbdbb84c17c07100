"""The video reference image (libvips): size, JPEG quality and chroma, fidelity to the AWS sample's Pillow method.

No timing here: the speed target lives in bench/video_request_prep.py.
"""

import base64
import io
import json
import math

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageOps, JpegImagePlugin

from omnireel.core.errors import MalformedModelOutput, ReferenceTooLarge
from omnireel.media.reference_image import MAX_TEXT_PART_BYTES, prepare_video_reference
from tests.support.media import png_bytes


def jpeg_of(part_text: str) -> bytes:
    url = json.loads(part_text)["image_url"]
    assert url.startswith("data:image/jpeg;base64,")
    return base64.b64decode(url.split(",", 1)[1], validate=True)


def decode_reference(part_text: str) -> Image.Image:
    return Image.open(io.BytesIO(jpeg_of(part_text)))


def scene_png(width: int = 1024, height: int = 1024) -> bytes:
    """Gradients, hard-edged shapes and thin lines: detail a wrong crop, filter or chroma would show."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], -1).astype(np.uint8)
    img = Image.fromarray(base, "RGB")
    draw = ImageDraw.Draw(img)
    for i in range(24):
        box = (37 * i % width, 53 * i % height, 37 * i % width + 90, 53 * i % height + 70)
        draw.ellipse(box, fill=((97 * i) % 256, (31 * i) % 256, (177 * i) % 256), outline=(10, 10, 10), width=2)
        draw.line((0, 40 * i, width, 40 * i + 25), fill=(250, 250, 240), width=1)
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def sample_reference(png: bytes, width: int, height: int) -> Image.Image:
    """The AWS sample's calls: convert the full image to RGB, ImageOps.fit LANCZOS (then JPEG q90, not needed here)."""
    with Image.open(io.BytesIO(png)) as source:
        return ImageOps.fit(source.convert("RGB"), (width, height), method=Image.Resampling.LANCZOS)


def psnr(a: Image.Image, b: Image.Image) -> float:
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return 10 * math.log10(255**2 / float(np.mean(diff**2)))


def test_reference_is_a_480x320_jpeg_data_url_under_the_part_limit():
    ref = prepare_video_reference(scene_png(), 480, 320)
    img = decode_reference(ref.part_text)
    assert img.format == "JPEG" and img.mode == "RGB" and img.size == (480, 320)
    assert ref.quality == 90 and ref.jpeg_bytes == len(jpeg_of(ref.part_text))
    assert ref.part_bytes == len(ref.part_text.encode()) < MAX_TEXT_PART_BYTES
    assert json.loads(ref.part_text).keys() == {"image_url"} and " " not in ref.part_text  # compact JSON


def test_jpeg_is_quality_90_with_420_chroma_like_the_sample():
    png = scene_png()
    img = decode_reference(prepare_video_reference(png, 480, 320).part_text)
    assert JpegImagePlugin.get_sampling(img) == 2  # 4:2:0 (libvips' default at Q >= 90 would be 4:4:4)
    buffer = io.BytesIO()
    sample_reference(png, 480, 320).save(buffer, format="JPEG", quality=90, optimize=True)
    with Image.open(buffer) as sample:
        # Same libjpeg quantisation tables as the sample's quality=90 (luma and chroma).
        assert img.quantization == sample.quantization
    assert "progressive" not in img.info and "exif" not in img.info and "icc_profile" not in img.info


def test_pixels_match_the_samples_fit():
    png = scene_png()
    ours = decode_reference(prepare_video_reference(png, 480, 320).part_text).convert("RGB")
    assert psnr(ours, sample_reference(png, 480, 320)) > 30  # same crop and filter; differences are JPEG's


@pytest.mark.parametrize(
    ("size", "target"), [((1024, 1024), (480, 320)), ((512, 900), (320, 480)), ((700, 300), (480, 320))]
)
def test_other_shapes_fit_the_same_centre_box(size, target):
    png = scene_png(*size)
    ours = decode_reference(prepare_video_reference(png, *target).part_text).convert("RGB")
    assert ours.size == target
    # Same box up to the crop offset: libvips crops after the resize at a whole output pixel, Pillow resamples a
    # fractional box, so they may differ by up to half a pixel (a 1024x1024 still for a 480x320 video crops at exactly
    # 80 px: no offset there). Compared at a quarter of the size, where half a pixel no longer shows.
    quarter = (target[0] // 4, target[1] // 4)
    sample = sample_reference(png, *target)
    assert psnr(ours.resize(quarter, Image.Resampling.BOX), sample.resize(quarter, Image.Resampling.BOX)) > 30


@pytest.mark.parametrize("mode", ["RGBA", "P", "L", "LA", "I;16"])
def test_any_png_mode_becomes_rgb(mode):
    img = decode_reference(prepare_video_reference(png_bytes(256, 512, mode=mode), 480, 320).part_text)
    assert img.mode == "RGB" and img.size == (480, 320)


def test_fit_crops_the_centre_instead_of_stretching():
    # Left third red, middle third green, right third blue; a 1:1 crop of a 3:1 image keeps only green.
    src = Image.new("RGB", (900, 300))
    for i, colour in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255)]):
        src.paste(colour, (i * 300, 0, (i + 1) * 300, 300))
    buffer = io.BytesIO()
    src.save(buffer, format="PNG")
    img = decode_reference(prepare_video_reference(buffer.getvalue(), 320, 320).part_text)
    r, g, b = img.resize((1, 1)).getpixel((0, 0))
    assert g > 200 and r < 40 and b < 40


def test_same_png_gives_the_same_bytes():
    png = scene_png()
    assert prepare_video_reference(png, 480, 320) == prepare_video_reference(png, 480, 320)


def test_quality_drops_until_the_part_fits():
    noisy = png_bytes(1280, 1280, noise=True)
    full = prepare_video_reference(noisy, 1280, 1280)
    assert full.part_bytes > 700_000  # noise barely compresses
    tight = prepare_video_reference(noisy, 1280, 1280, max_part_bytes=full.part_bytes - 1)
    assert tight.quality < full.quality and tight.part_bytes <= full.part_bytes - 1


def test_impossible_limit_fails_clearly():
    with pytest.raises(ReferenceTooLarge) as caught:
        prepare_video_reference(png_bytes(512, 512, noise=True), 480, 320, max_part_bytes=10_000)
    assert "10000-byte" in caught.value.message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x89PNG\r\n\x1a\nbroken", id="garbage"),
        pytest.param(png_bytes(1024, 1024, noise=True)[:200_000], id="truncated"),
        pytest.param(b"GIF89a" + b"\0" * 64, id="not-png"),
    ],
)
def test_undecodable_input_is_malformed_output(data):
    with pytest.raises(MalformedModelOutput, match="cannot decode the generated image"):
        prepare_video_reference(data, 480, 320)


def test_only_png_is_decoded():
    """The model's output is a PNG: other formats libvips could load (JPEG here) are refused, not converted."""
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 10, 10)).save(buffer, format="JPEG")
    with pytest.raises(MalformedModelOutput):
        prepare_video_reference(buffer.getvalue(), 480, 320)
