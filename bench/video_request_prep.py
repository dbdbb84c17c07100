"""Video request preparation: 1024x1024 PNG -> 480x320 JPEG data URL -> staged multipart body.

    .venv/bin/python bench/video_request_prep.py [--quick] [--reps 200] [--out docs/benchmarks.md|-]

Side by side, in one process, interleaved call by call on the same deterministic photo-like PNGs:

* ``sample`` - the AWS sample's method, re-implemented here from its description: ``ImageOps.fit`` to
  (w, h) with LANCZOS, RGB, JPEG quality 90 with ``optimize=True``, base64 data URL in compact JSON,
  ``urllib3.encode_multipart_formdata`` with boundary ``vllm-omni-<uuid hex>``, all text parts.
* ``ours`` - ``omnireel.media.prepare_video_reference`` + ``omnireel.video_request.build_video_request``.
* ``fast`` - a candidate for media.py (``fast_prepare_video_reference`` below): decode only the PNG rows
  the resize reads, then the same Lanczos resize and JPEG q90 (bit-identical pixels to ``ours``).

Quality: each staged body is parsed back, its JPEG decoded and compared with an exact reference
(float64 separable Lanczos-3 from the original PNG over the exact centre-crop box, no rounding, no
JPEG) by SSIM (Gaussian window 11x11, sigma 1.5, on BT.601 luma) and PSNR (RGB).
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import email.parser
import gc
import io
import json
import math
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import urllib3
from PIL import Image, ImageDraw, ImageFile, ImageFilter, ImageOps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import emit, machine, quantile, today  # noqa: E402
from omnireel.media import (  # noqa: E402
    JPEG_QUALITIES,
    MAX_TEXT_PART_BYTES,
    VideoReference,
    _fit,
    prepare_video_reference,
)
from omnireel.request import JobRequest  # noqa: E402
from omnireel.video_request import build_video_request  # noqa: E402

WIDTH, HEIGHT = 480, 320
SOURCE = 1024
MODEL_ID = "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
PROMPT = "A red fox trots across a snowy meadow at golden hour, cinematic, shallow depth of field"
SEED = 42
REQUEST = JobRequest(prompt=PROMPT, seed=SEED)
LANCZOS_SUPPORT = 3.0


# --------------------------------------------------------------------------------------- test images
def _fractal_noise(rng: np.random.Generator, size: int, beta: float) -> np.ndarray:
    """Zero-mean, unit-variance 1/f^beta noise (natural-image-like power spectrum)."""
    spectrum = np.fft.rfft2(rng.standard_normal((size, size)))
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    radius = np.sqrt(fx * fx + fy * fy)
    radius[0, 0] = 1.0
    field = np.fft.irfft2(spectrum / radius**beta, s=(size, size))
    return (field - field.mean()) / field.std()


def make_test_png(kind: str, seed: int, size: int = SOURCE) -> bytes:
    """A deterministic photo-like RGB PNG (gradients, 1/f texture, shapes, edges, sensor grain).

    Saved with Pillow's PNG defaults, as the image container does (vLLM-Omni encodes with PIL).
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size] / size
    if kind == "landscape":  # sky gradient over textured terrain, soft light
        sky = np.stack([90 + 100 * y, 140 + 80 * y, 230 - 40 * y], -1)
        terrain_line = 0.55 + 0.08 * _fractal_noise(rng, size, 1.8)[0][None, :]
        ground = np.stack([70 + 60 * x, 110 + 40 * (1 - y), 50 + 30 * x], -1)
        ground += 35 * _fractal_noise(rng, size, 1.2)[..., None] * np.array([1.0, 0.9, 0.6])
        img = np.where((y > terrain_line)[..., None], ground, sky)
        img += 8 * _fractal_noise(rng, size, 2.2)[..., None]
    elif kind == "objects":  # studio scene: vignette background, many hard-edged lit objects
        img = np.stack([180 - 90 * y, 160 - 60 * x * y, 150 - 80 * x], -1)
        img *= 1 - 0.35 * ((x - 0.5) ** 2 + (y - 0.5) ** 2)[..., None]
        img += 10 * _fractal_noise(rng, size, 1.5)[..., None]
    elif kind == "texture":  # foliage / fabric: dense high-frequency detail everywhere
        img = np.stack([_fractal_noise(rng, size, b) for b in (0.9, 1.0, 1.1)], -1) * 45 + 120
        stripes = 25 * np.sin(2 * np.pi * (x * 90 + 6 * _fractal_noise(rng, size, 2.0)))
        img += stripes[..., None] * np.array([0.8, 1.0, 0.6])
    else:
        raise ValueError(kind)
    img += rng.normal(0.0, 3.0, img.shape)  # sensor grain / diffusion noise
    picture = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    if kind != "texture":
        draw = ImageDraw.Draw(picture)
        for _ in range(60 if kind == "objects" else 15):
            cx, cy = rng.integers(0, size, 2).tolist()
            r = int(rng.integers(8, 140))
            colour = tuple(int(c) for c in rng.integers(20, 240, 3))
            box = (cx - r, cy - r, cx + r, cy + int(r * rng.uniform(0.4, 1.2)))
            if rng.random() < 0.5:
                draw.ellipse(box, fill=colour, outline=(15, 15, 15), width=int(rng.integers(1, 4)))
            else:
                draw.rectangle(box, fill=colour)
        for i in range(12):  # thin lines: the detail a resize can alias
            y0 = int(rng.integers(0, size))
            draw.line((0, y0, size, y0 + 80 * math.sin(i)), fill=(240, 240, 230), width=1)
        picture = picture.filter(ImageFilter.GaussianBlur(0.6))  # optics: slightly soft edges
        grain = rng.normal(0.0, 2.0, (size, size, 3))
        picture = Image.fromarray(np.clip(np.asarray(picture) + grain, 0, 255).astype(np.uint8), "RGB")
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


IMAGE_KINDS = (("landscape", 1), ("objects", 2), ("texture", 3))


# --------------------------------------------------------------------------------------- the sample's method
def sample_prepare_video_reference(image_bytes: bytes, width: int, height: int) -> bytes:
    """ImageOps.fit to (w, h) with LANCZOS, RGB, JPEG quality 90 with optimize=True."""
    with Image.open(io.BytesIO(image_bytes)) as img:
        fitted = ImageOps.fit(img, (width, height), method=Image.Resampling.LANCZOS).convert("RGB")
    buffer = io.BytesIO()
    fitted.save(buffer, format="JPEG", quality=90, optimize=True)
    return buffer.getvalue()


def sample_build_video_multipart(jpeg: bytes, request: JobRequest, model_id: str) -> tuple[bytes, str]:
    """All text parts, encoded by urllib3 with a ``vllm-omni-<uuid hex>`` boundary."""
    data_url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
    video = request.video
    fields = {
        "model": model_id,
        "prompt": request.prompt,
        "image_reference": json.dumps({"image_url": data_url}, separators=(",", ":")),
        "width": str(video.width),
        "height": str(video.height),
        "num_frames": str(video.num_frames),
        "fps": str(video.fps),
        "num_inference_steps": str(video.num_inference_steps),
        "guidance_scale": str(request.guidance_scale),
        "seed": str(request.seed),
    }
    return urllib3.encode_multipart_formdata(fields, boundary=f"vllm-omni-{uuid.uuid4().hex}")


def run_sample(png: bytes) -> tuple[bytes, str]:
    return sample_build_video_multipart(sample_prepare_video_reference(png, WIDTH, HEIGHT), REQUEST, MODEL_ID)


# --------------------------------------------------------------------------------------- ours
def run_ours(png: bytes) -> tuple[bytes, str]:
    body = build_video_request(REQUEST, prepare_video_reference(png, WIDTH, HEIGHT), model_id=MODEL_ID)
    return body.body, body.content_type


# --------------------------------------------------------------------------------------- candidate for media.py
def _crop_box(src_w: int, src_h: int, width: int, height: int) -> tuple[float, float, float, float]:
    """The centre crop of ``_fit`` / ImageOps.fit (centering 0.5) to the target aspect ratio."""
    target = width / height
    if src_w / src_h > target:
        crop_w = src_h * target
        return ((src_w - crop_w) / 2, 0.0, (src_w + crop_w) / 2, float(src_h))
    crop_h = src_w / target
    return (0.0, (src_h - crop_h) / 2, float(src_w), (src_h + crop_h) / 2)


def _decode_rows_needed(img: Image.Image, width: int, height: int) -> None:
    """Limit a (non-interlaced) PNG's decode to the rows the Lanczos resize will read.

    PNG rows must be inflated and unfiltered in order, but rows below the crop box plus the filter's
    support are never read by the resize, so decoding can stop there. Pixels above that row are
    bit-identical to a full decode. Any other format or layout is left alone (full decode).
    """
    tile = img.tile
    if img.format != "PNG" or img.info.get("interlace") or len(tile) != 1 or tile[0].codec_name != "zip":
        return
    src_w, src_h = img.size
    box = _crop_box(src_w, src_h, width, height)
    scale = (box[3] - box[1]) / height
    last_row = min(src_h, math.ceil(box[3] + LANCZOS_SUPPORT * max(scale, 1.0)) + 2)
    if last_row < src_h:
        x0, y0, x1, _ = tile[0].extents
        img.tile = [tile[0]._replace(extents=(x0, y0, x1, last_row))]


def _fit_with(img: Image.Image, width: int, height: int, resample: Image.Resampling) -> Image.Image:
    """``media._fit`` (RGB input) with a choice of filter."""
    if resample == Image.Resampling.LANCZOS:
        return _fit(img, width, height)
    box = _crop_box(*img.size, width, height)
    return img.convert("RGB").resize((width, height), resample, box=box, reducing_gap=3.0)


def fast_prepare_video_reference(
    png: bytes,
    width: int,
    height: int,
    *,
    resample: Image.Resampling = Image.Resampling.LANCZOS,
    max_part_bytes: int = MAX_TEXT_PART_BYTES,
) -> VideoReference:
    """``prepare_video_reference`` with a partial PNG decode (and optionally another filter).

    With LANCZOS the staged bytes are identical to ``prepare_video_reference``'s.
    """
    with Image.open(io.BytesIO(png)) as img:
        _decode_rows_needed(img, width, height)
        img.load()
        fitted = _fit_with(img, width, height, resample)
    for quality in JPEG_QUALITIES:
        buffer = io.BytesIO()
        fitted.save(buffer, format="JPEG", quality=quality)
        jpeg = buffer.getvalue()
        text = json.dumps(
            {"image_url": "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")}, separators=(",", ":")
        )
        if len(text) <= max_part_bytes:
            return VideoReference(part_text=text, jpeg_bytes=len(jpeg), quality=quality)
    raise ValueError("does not fit")  # media.py raises ReferenceTooLarge here


def run_partial(png: bytes) -> tuple[bytes, str]:
    body = build_video_request(REQUEST, fast_prepare_video_reference(png, WIDTH, HEIGHT), model_id=MODEL_ID)
    return body.body, body.content_type


def run_partial_bicubic(png: bytes) -> tuple[bytes, str]:
    reference = fast_prepare_video_reference(png, WIDTH, HEIGHT, resample=Image.Resampling.BICUBIC)
    body = build_video_request(REQUEST, reference, model_id=MODEL_ID)
    return body.body, body.content_type


METHODS: dict[str, Callable[[bytes], tuple[bytes, str]]] = {
    "sample": run_sample,
    "ours": run_ours,
    "ours+partial": run_partial,
    "ours+partial+bicubic": run_partial_bicubic,
}


# --------------------------------------------------------------------------------------- quality
def lanczos_matrix(in_size: int, out_size: int, start: float, length: float, a: float = LANCZOS_SUPPORT) -> np.ndarray:
    """Resampling matrix (out_size x in_size) of an antialiased Lanczos-a over [start, start+length)."""
    scale = length / out_size
    stretch = max(scale, 1.0)
    support = a * stretch
    matrix = np.zeros((out_size, in_size))
    for i in range(out_size):
        centre = start + (i + 0.5) * scale
        lo = max(math.floor(centre - support), 0)
        hi = min(math.ceil(centre + support), in_size)
        t = (np.arange(lo, hi) + 0.5 - centre) / stretch
        weights = np.where(np.abs(t) < a, np.sinc(t) * np.sinc(t / a), 0.0)
        matrix[i, lo:hi] = weights / weights.sum()
    return matrix


def exact_reference(png: bytes, width: int, height: int) -> np.ndarray:
    """Float64 centre-crop + Lanczos-3 resize of the decoded PNG: no 8-bit intermediates, no JPEG."""
    with Image.open(io.BytesIO(png)) as img:
        rgb = np.asarray(img.convert("RGB"), dtype=np.float64)
    src_h, src_w = rgb.shape[:2]
    x0, y0, x1, y1 = _crop_box(src_w, src_h, width, height)
    rows = lanczos_matrix(src_h, height, y0, y1 - y0)
    cols = lanczos_matrix(src_w, width, x0, x1 - x0)
    return np.einsum("ij,jkc,lk->ilc", rows, rgb, cols, optimize=True)


def _luma(rgb: np.ndarray) -> np.ndarray:
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def _gaussian_filter_valid(image: np.ndarray, window: int = 11, sigma: float = 1.5) -> np.ndarray:
    offsets = np.arange(window) - (window - 1) / 2
    kernel = np.exp(-(offsets**2) / (2 * sigma**2))
    kernel /= kernel.sum()
    view = np.lib.stride_tricks.sliding_window_view(image, window, axis=0) @ kernel
    return np.lib.stride_tricks.sliding_window_view(view, window, axis=1) @ kernel


def ssim(a: np.ndarray, b: np.ndarray, data_range: float = 255.0) -> float:
    """Mean SSIM (Wang et al. 2004) of two single-channel images: Gaussian 11x11 window, sigma 1.5."""
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    a, b = a.astype(np.float64), b.astype(np.float64)
    mu_a, mu_b = _gaussian_filter_valid(a), _gaussian_filter_valid(b)
    var_a = _gaussian_filter_valid(a * a) - mu_a**2
    var_b = _gaussian_filter_valid(b * b) - mu_b**2
    cov = _gaussian_filter_valid(a * b) - mu_a * mu_b
    ssim_map = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return float(ssim_map.mean())


def psnr(a: np.ndarray, b: np.ndarray, data_range: float = 255.0) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(data_range**2 / mse)


def parse_staged_body(body: bytes, content_type: str) -> tuple[dict[str, str], bytes]:
    """Parse the multipart body back (as the container would): text fields and the decoded JPEG."""
    message = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    fields: dict[str, str] = {}
    for part in message.get_payload():
        name = part.get_param("name", header="content-disposition")
        fields[name] = part.get_payload(decode=True).decode()
    data_url = json.loads(fields["image_reference"])["image_url"]
    return fields, base64.b64decode(data_url.split(",", 1)[1])


# --------------------------------------------------------------------------------------- timing and profile
def time_methods(pngs: list[bytes], reps: int, warmup: int) -> dict[str, list[float]]:
    """Per-call wall time (ms), interleaving the methods call by call so drift hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in METHODS}
    for png in pngs:
        for _ in range(warmup):
            for run in METHODS.values():
                run(png)
    gc.collect()
    for rep in range(reps):
        for png in pngs:
            order = list(METHODS.items())
            if rep % 2:
                order.reverse()
            for name, run in order:
                start = time.perf_counter()
                run(png)
                times[name].append((time.perf_counter() - start) * 1e3)
    return times


def stage_times(png: bytes, reps: int) -> dict[str, dict[str, float]]:
    """Median ms of each stage of each method, timed separately (so they need not add up exactly)."""

    def med(fn: Callable[[], object]) -> float:
        for _ in range(3):
            fn()
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)

    def decode() -> Image.Image:
        img = Image.open(io.BytesIO(png))
        img.load()
        return img

    def decode_partial() -> Image.Image:
        img = Image.open(io.BytesIO(png))
        _decode_rows_needed(img, WIDTH, HEIGHT)
        img.load()
        return img

    full = decode()
    fitted = _fit(full, WIDTH, HEIGHT)
    sample_fitted = ImageOps.fit(full, (WIDTH, HEIGHT), method=Image.Resampling.LANCZOS).convert("RGB")

    def jpeg(img: Image.Image, **kw: object) -> bytes:
        buffer = io.BytesIO()
        img.save(buffer, format="JPEG", quality=90, **kw)
        return buffer.getvalue()

    jpeg_plain = jpeg(fitted)
    reference = prepare_video_reference(png, WIDTH, HEIGHT)
    wrap = lambda j: json.dumps(  # noqa: E731
        {"image_url": "data:image/jpeg;base64," + base64.b64encode(j).decode("ascii")}, separators=(",", ":")
    )
    common = {"PNG decode (full)": med(decode), "base64 + JSON": med(lambda: wrap(jpeg_plain))}
    return {
        "sample": {
            **common,
            "ImageOps.fit LANCZOS + RGB": med(
                lambda: ImageOps.fit(full, (WIDTH, HEIGHT), method=Image.Resampling.LANCZOS).convert("RGB")
            ),
            "JPEG q90 optimize": med(lambda: jpeg(sample_fitted, optimize=True)),
            "multipart (urllib3)": med(lambda: sample_build_video_multipart(jpeg_plain, REQUEST, MODEL_ID)),
        },
        "ours": {
            **common,
            "_fit (Lanczos, box, reducing_gap 3)": med(lambda: _fit(full, WIDTH, HEIGHT)),
            "JPEG q90": med(lambda: jpeg(fitted)),
            "multipart (requests-toolbelt)": med(lambda: build_video_request(REQUEST, reference, model_id=MODEL_ID)),
        },
        "ours+partial": {"PNG decode (rows the resize reads)": med(decode_partial)},
        "ours+partial+bicubic": {
            "_fit with BICUBIC": med(lambda: _fit_with(full, WIDTH, HEIGHT, Image.Resampling.BICUBIC))
        },
    }


def profile_ours(png: bytes, reps: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(reps):
        run_ours(png)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
    return out.getvalue()


# --------------------------------------------------------------------------------------- report
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 repetitions, 1 image, no write unless --out")
    parser.add_argument("--reps", type=int, default=None, help="timed calls per method and image (default 150)")
    parser.add_argument("--out", default=None, help="file whose 'video_request_prep' section is replaced; '-' prints")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of ours")
    args = parser.parse_args()
    reps = args.reps or (30 if args.quick else 150)
    out = args.out if args.out is not None else ("-" if args.quick else str(REPO / "docs" / "benchmarks.md"))
    kinds = IMAGE_KINDS[:1] if args.quick else IMAGE_KINDS

    started = time.perf_counter()
    pngs = [make_test_png(kind, seed) for kind, seed in kinds]

    # Quality first (one call each), then the checks that all three produce an equivalent request.
    quality: dict[str, list[tuple[float, float, int, int]]] = {name: [] for name in METHODS}
    for png in pngs:
        reference = exact_reference(png, WIDTH, HEIGHT)
        parsed = {}
        for name, run in METHODS.items():
            body, content_type = run(png)
            fields, jpeg = parse_staged_body(body, content_type)
            parsed[name] = fields
            with Image.open(io.BytesIO(jpeg)) as decoded:
                assert decoded.size == (WIDTH, HEIGHT) and decoded.format == "JPEG"
                pixels = np.asarray(decoded.convert("RGB"), dtype=np.float64)
            quality[name].append((ssim(_luma(pixels), _luma(reference)), psnr(pixels, reference), len(jpeg), len(body)))
        without_image = [{k: v for k, v in f.items() if k != "image_reference"} for f in parsed.values()]
        assert all(f == without_image[0] for f in without_image), without_image
    ImageFile.LOAD_TRUNCATED_IMAGES = False

    times = time_methods(pngs, reps, warmup=5)
    stages = stage_times(pngs[0], max(10, reps // 3))
    if args.profile:
        print(profile_ours(pngs[0], 20))

    med = {name: statistics.median(values) for name, values in times.items()}
    n_img = len(pngs)
    # Worst per-image SSIM difference to the sample (negative = worse than the sample).
    worst = {name: min(quality[name][i][0] - quality["sample"][i][0] for i in range(n_img)) for name in METHODS}
    rows = []
    for name in METHODS:
        q = quality[name]
        rows.append(
            f"| {name} | {med[name]:.2f} | {quantile(times[name], 0.95):.2f} | "
            f"{statistics.mean(r[2] for r in q):,.0f} | {statistics.mean(r[3] for r in q):,.0f} | "
            f"{statistics.mean(r[0] for r in q):.4f} | {worst[name]:+.4f} | {statistics.mean(r[1] for r in q):.2f} | "
            f"{med['sample'] / med[name]:.2f}x |"
        )
    header = " | ".join(f"SSIM {name}" for name in METHODS) + " | " + " | ".join(f"ms {name}" for name in METHODS)
    per_image = "\n".join(
        f"| {kind} | {len(png):,} | "
        + " | ".join(f"{quality[name][i][0]:.4f}" for name in METHODS)
        + " | "
        + " | ".join(f"{statistics.median(times[name][i::n_img]):.2f}" for name in METHODS)
        + " |"
        for i, ((kind, _), png) in enumerate(zip(kinds, pngs, strict=True))
    )
    stage_rows = "\n".join(
        f"| {method} | {stage} | {ms:.2f} |" for method, parts in stages.items() for stage, ms in parts.items()
    )
    verdicts = "\n".join(
        f"- {name}: {med['sample'] / med[name]:.2f}x, worst per-image SSIM difference {worst[name]:+.4f} -> "
        + ("meets" if med["sample"] / med[name] >= 1.5 and worst[name] >= -0.005 else "**misses**")
        + " the target"
        for name in METHODS
        if name != "sample"
    )
    text = f"""## Video request preparation (`bench/video_request_prep.py`)

Command: `.venv/bin/python bench/video_request_prep.py{" --quick" if args.quick else ""}` ({reps} timed calls per method
and image). Machine: {machine()}. Date: {today()}. Run time: {time.perf_counter() - started:.0f} s.

Input: {n_img} deterministic photo-like 1024x1024 RGB PNGs (gradients, 1/f texture, shapes, thin lines,
grain; Pillow's default PNG encoder, as the image container uses). Output: the full /v1/videos/sync multipart
body (10 text parts, 480x320 JPEG data URL in `image_reference`). The methods are timed call by call,
interleaved, after 5 warm-up calls; quality is measured on the staged body parsed back, against a float64
Lanczos-3 resize of the original over the exact centre-crop box (no rounding, no JPEG). `ours+partial` and
`ours+partial+bicubic` are candidates for media.py (`fast_prepare_video_reference` in the bench file).

| method | median ms | p95 ms | JPEG bytes | body bytes | SSIM | worst SSIM diff | PSNR dB | speed vs sample |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Per image:

| image | PNG bytes | {header} |
|{"---|" * (2 + 2 * len(METHODS))}
{per_image}

Stage medians (each stage timed alone on image 1):

| method | stage | median ms |
|---|---|---|
{stage_rows}

Target: >= 1.5x faster than the sample at equal quality (SSIM within 0.005 on every image):
{verdicts}
"""
    emit("video_request_prep", text, out)


if __name__ == "__main__":
    main()
