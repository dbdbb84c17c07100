import base64
import io
import json

import pytest
from PIL import Image

from omnireel.errors import MalformedModelOutput, ReferenceTooLarge
from omnireel.media import MAX_TEXT_PART_BYTES, check_png, prepare_video_reference
from omnireel.mp4 import check_mp4
from tests.unit.domain.media_fixtures import png_bytes


def decode_reference(part_text: str) -> Image.Image:
    url = json.loads(part_text)["image_url"]
    assert url.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def test_reference_is_a_jpeg_data_url_of_the_video_size():
    ref = prepare_video_reference(png_bytes(1024, 1024), 480, 320)
    img = decode_reference(ref.part_text)
    assert img.format == "JPEG" and img.mode == "RGB" and img.size == (480, 320)
    assert ref.part_bytes < MAX_TEXT_PART_BYTES and ref.quality == 90


@pytest.mark.parametrize("mode", ["RGBA", "P", "L", "LA"])
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


def test_not_an_image_is_malformed_output():
    with pytest.raises(MalformedModelOutput):
        prepare_video_reference(b"\x89PNG\r\n\x1a\nbroken", 480, 320)


def test_check_png():
    assert check_png(png_bytes(300, 200)) == (300, 200)
    with pytest.raises(MalformedModelOutput, match="not a PNG"):
        check_png(b"GIF89a....")
    with pytest.raises(MalformedModelOutput, match="corrupt"):
        check_png(png_bytes(64, 64)[:40])


def test_check_mp4():
    check_mp4(b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00", 50_000)
    with pytest.raises(MalformedModelOutput, match="not an MP4"):
        check_mp4(b"<html>error</html>", 50_000)
    with pytest.raises(MalformedModelOutput, match="too small"):
        check_mp4(b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00", 100)


def _mp4() -> bytes:
    from tests.integration.pipeline.harness import tiny_mp4

    return tiny_mp4()


@pytest.mark.parametrize("cut", [lambda d: d[: len(d) // 3], lambda d: d[:-1], lambda d: d[:40]])
def test_truncated_mp4_is_malformed(cut):
    from omnireel.mp4 import check_mp4_boxes

    data = cut(_mp4())
    with pytest.raises(MalformedModelOutput):
        check_mp4_boxes(lambda offset, length: data[offset : offset + length], len(data))


def test_whole_mp4_passes_the_box_walk_with_few_reads():
    from omnireel.mp4 import check_mp4_boxes

    data, reads = _mp4(), []

    def read_at(offset, length):
        reads.append((offset, length))
        return data[offset : offset + length]

    check_mp4_boxes(read_at, len(data))
    assert len(reads) <= 8 and all(length <= 16 for _, length in reads)


def test_mp4_without_moov_is_malformed():
    from omnireel.mp4 import check_mp4_boxes

    data = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + (2000).to_bytes(4, "big") + b"mdat" + b"\x00" * 1992
    with pytest.raises(MalformedModelOutput, match="no moov box"):
        check_mp4_boxes(lambda offset, length: data[offset : offset + length], len(data))
