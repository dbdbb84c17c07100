import pytest

from omnireel.core.errors import MalformedModelOutput
from omnireel.media.mp4 import check_mp4
from omnireel.media.png import check_png
from tests.support.media import png_bytes


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
    from tests.support.media import tiny_mp4

    return tiny_mp4()


@pytest.mark.parametrize("cut", [lambda d: d[: len(d) // 3], lambda d: d[:-1], lambda d: d[:40]])
def test_truncated_mp4_is_malformed(cut):
    from omnireel.media.mp4 import check_mp4_boxes

    data = cut(_mp4())
    with pytest.raises(MalformedModelOutput):
        check_mp4_boxes(lambda offset, length: data[offset : offset + length], len(data))


def test_whole_mp4_passes_the_box_walk_with_few_reads():
    from omnireel.media.mp4 import check_mp4_boxes

    data, reads = _mp4(), []

    def read_at(offset, length):
        reads.append((offset, length))
        return data[offset : offset + length]

    check_mp4_boxes(read_at, len(data))
    assert len(reads) <= 8 and all(length <= 16 for _, length in reads)


def test_mp4_without_moov_is_malformed():
    from omnireel.media.mp4 import check_mp4_boxes

    data = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + (2000).to_bytes(4, "big") + b"mdat" + b"\x00" * 1992
    with pytest.raises(MalformedModelOutput, match="no moov box"):
        check_mp4_boxes(lambda offset, length: data[offset : offset + length], len(data))


def test_the_box_walk_reads_a_short_video_in_one_block() -> None:
    """async_result's MP4 check: header reads served from 64 KiB blocks, each fetched once (one ranged GET here)."""
    from omnireel.media.mp4 import block_reader, check_mp4_boxes

    ftyp = (24).to_bytes(4, "big") + b"ftypisom" + b"\0" * 12
    moov = (2000).to_bytes(4, "big") + b"moov" + b"\0" * 1992
    mdat = (70000).to_bytes(4, "big") + b"mdat" + b"\1" * 69992
    data = ftyp + moov + mdat
    reads: list[tuple[int, int]] = []

    def read_at(offset: int, length: int) -> bytes:
        reads.append((offset, length))
        return data[offset : offset + length]

    check_mp4_boxes(block_reader(read_at), len(data))
    assert reads == [(0, 65536)]
    read = block_reader(read_at)
    assert read(65530, 12) == data[65530:65542] and reads[-2:] == [(0, 65536), (65536, 65536)]


def _pillow_verdict(data: bytes) -> tuple[int, int] | None:
    """What the check was before: Pillow's open + verify (None: refused)."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
            return img.size
    except Exception:
        return None


def _damaged() -> list[bytes]:
    good = png_bytes(64, 48, noise=True)
    flip = lambda data, at: data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1 :]  # noqa: E731
    cases = [good, png_bytes(300, 200), png_bytes(16, 16, mode="RGBA"), png_bytes(16, 16, mode="L"),
             png_bytes(1, 1, mode="P")]  # fmt: skip
    cases += [good[:cut] for cut in (8, 12, 20, 33, 40, 100, len(good) // 2, len(good) - 12, len(good) - 1)]
    cases += [flip(good, at) for at in (16, 20, 29, 45, len(good) // 2, len(good) - 5)]  # IHDR, data, CRCs, IEND
    cases.append(good[:-12])  # no IEND
    return cases


@pytest.mark.parametrize("data", _damaged())
def test_the_chunk_walk_accepts_and_refuses_what_pillow_did(data):
    try:
        ours: tuple[int, int] | None = check_png(data)
    except MalformedModelOutput as exc:
        assert "corrupt PNG" in exc.message
        ours = None
    assert ours == _pillow_verdict(data)
