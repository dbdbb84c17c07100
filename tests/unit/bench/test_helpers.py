"""Helpers of bench/video_request_prep.py and bench/report.py."""

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from bench.report import quantile, table, write_section
from bench.video_request_prep import lanczos_matrix, make_test_png, psnr, sample_prepare_video_reference, ssim


def test_ssim_identity_and_degradation():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 255, (64, 64))
    assert ssim(a, a) == pytest.approx(1.0)
    assert psnr(a, a) == float("inf")
    assert ssim(a, a + rng.normal(0, 60, a.shape)) < 0.9


def test_lanczos_matrix_rows_are_normalised():
    m = lanczos_matrix(1024, 320, 170.667, 682.667)
    assert m.shape == (320, 1024)
    assert np.allclose(m.sum(axis=1), 1.0)


def test_sample_method_is_the_aws_samples_calls():
    """The baseline converts the *full* image to RGB before ImageOps.fit, as vllm_omni_media.py does."""
    png = make_test_png("objects", 7, size=256)
    with Image.open(io.BytesIO(png)) as source:
        fitted = ImageOps.fit(source.convert("RGB"), (120, 80), method=Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    fitted.save(buffer, format="JPEG", quality=90, optimize=True)
    assert sample_prepare_video_reference(png, 120, 80) == buffer.getvalue()


def test_quantile_and_table():
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert table(["a", "b"], [[1, 2]]).splitlines() == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_write_section_replaces_only_its_block(tmp_path):
    doc = tmp_path / "b.md"
    doc.write_text("# T\n\n<!-- bench:x -->\nold\n<!-- /bench:x -->\n\ntail\n")
    write_section("x", "new", doc)
    write_section("y", "added", doc)
    text = doc.read_text()
    assert "old" not in text and "<!-- bench:x -->\nnew\n<!-- /bench:x -->" in text
    assert text.index("tail") < text.index("<!-- bench:y -->")
