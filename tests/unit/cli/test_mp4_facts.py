"""mp4_facts reads frames, size and codec from the MP4's boxes; PyAV (in .venv-dev via .venv-emulator) decodes the
same files frame by frame and must agree."""

from __future__ import annotations

import io
from fractions import Fraction

import av
import numpy as np
import pytest

from omnireel.core.errors import MalformedModelOutput
from omnireel_cli.mp4_facts import VideoFacts, read_video_facts, video_facts
from omnireel_local.emulator.videos import encode_mp4, malformed_mp4


def _frames(count: int, width: int, height: int):
    for index in range(count):
        yield np.full((height, width, 3), (index * 13) % 256, dtype=np.uint8)


def _decoded(mp4: bytes) -> VideoFacts:
    with av.open(io.BytesIO(mp4)) as container:
        stream = container.streams.video[0]
        frames = [frame for frame in container.decode(stream)]
        return VideoFacts(len(frames), frames[0].width, frames[0].height, stream.codec_context.name)


@pytest.mark.parametrize(("count", "width", "height", "fps"), [(17, 480, 320, 8), (1, 64, 48, 24), (33, 96, 64, 16)])
def test_facts_match_a_full_decode_of_the_emulators_mp4(count, width, height, fps):
    mp4 = encode_mp4(_frames(count, width, height), width, height, fps)
    facts = video_facts(mp4)
    assert facts == _decoded(mp4) == VideoFacts(count, width, height, "h264")
    assert str(facts) == f"{count} frames {width}x{height} h264"


def test_fragmented_mp4_counts_the_samples_of_every_fragment():
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4", options={"movflags": "frag_keyframe+empty_moov"}) as container:
        stream = container.add_stream("libx264", rate=Fraction(8))
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"g": "4"}  # a keyframe every 4 frames: several fragments
        for index, array in enumerate(_frames(12, 64, 48)):
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    mp4 = buf.getvalue()
    assert mp4.count(b"moof") > 1
    assert video_facts(mp4) == _decoded(mp4) == VideoFacts(12, 64, 48, "h264")


def test_truncated_mp4_is_refused():
    noise = np.random.default_rng(7).integers(0, 256, (9, 64, 96, 3), dtype=np.uint8)  # ~100 KB of H.264
    mp4 = encode_mp4(iter(noise), 96, 64, 8)
    with pytest.raises(MalformedModelOutput, match="truncated"):
        video_facts(malformed_mp4(mp4))


def test_audio_only_mp4_has_no_video_track(tmp_path):
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream("aac", rate=24000)
        for index in range(20):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 24000, index * 1024
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    path = tmp_path / "speech.mp4"
    path.write_bytes(buf.getvalue())
    with pytest.raises(MalformedModelOutput, match="no video track"):
        read_video_facts(path)


def test_not_an_mp4_is_refused():
    with pytest.raises(MalformedModelOutput, match="not an MP4"):
        video_facts(b"\x89PNG\r\n\x1a\n" + bytes(2048))
