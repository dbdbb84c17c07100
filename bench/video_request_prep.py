"""Video request preparation: 1024x1024 PNG -> 480x320 JPEG data URL -> staged multipart body.

    .venv-dev/bin/python bench/video_request_prep.py [--quick] [--reps 150]
        [--out docs/benchmarks/video-request-prep.md|-]

Side by side, in one process, interleaved call by call on the same deterministic photo-like PNGs:

* ``sample`` - the AWS sample's calls, verbatim (``vllm_omni_media.py``: ``prepare_video_reference`` +
  ``build_video_multipart``): ``ImageOps.fit(source.convert("RGB"), (w, h), method=LANCZOS)``, JPEG quality 90
  with ``optimize=True``, base64 data URL in compact JSON, ``urllib3.encode_multipart_formdata`` with boundary
  ``vllm-omni-<uuid hex>``, all text parts.
* ``ours`` - ``omnireel.media.reference_image.prepare_video_reference`` (libvips: sequential PNG decode, Lanczos-3
  shrink, centre crop, JPEG Q90 with 4:2:0 chroma forced, one thread, operation cache off) +
  ``omnireel.media.video_request.build_video_request`` (urllib3, as the sample; requests-toolbelt until 2026-12-02).

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
import os
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyvips
import urllib3
from PIL import Image, ImageDraw, ImageFile, ImageFilter, ImageOps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import emit, machine, quantile, today  # noqa: E402
from omnireel.jobs.request import JobRequest  # noqa: E402
from omnireel.media.reference_image import MAX_TEXT_PART_BYTES, encode_jpeg, fit, prepare_video_reference  # noqa: E402
from omnireel.media.video_request import build_video_request  # noqa: E402

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
    """The sample's calls: convert the full image to RGB, ImageOps.fit LANCZOS, JPEG quality 90 optimize=True."""
    with Image.open(io.BytesIO(image_bytes)) as source:
        reference = ImageOps.fit(source.convert("RGB"), (width, height), method=Image.Resampling.LANCZOS)
    output = io.BytesIO()
    reference.save(output, format="JPEG", quality=90, optimize=True)
    return output.getvalue()


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


def _crop_box(src_w: int, src_h: int, width: int, height: int) -> tuple[float, float, float, float]:
    """The centre crop of ImageOps.fit (centering 0.5) to the target aspect ratio, in source pixels."""
    target = width / height
    if src_w / src_h > target:
        crop_w = src_h * target
        return ((src_w - crop_w) / 2, 0.0, (src_w + crop_w) / 2, float(src_h))
    crop_h = src_w / target
    return (0.0, (src_h - crop_h) / 2, float(src_w), (src_h + crop_h) / 2)


METHODS: dict[str, Callable[[bytes], tuple[bytes, str]]] = {"sample": run_sample, "ours": run_ours}


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

    def decode_rgb() -> Image.Image:
        with Image.open(io.BytesIO(png)) as source:
            return source.convert("RGB")

    full = decode_rgb()
    sample_fitted = ImageOps.fit(full, (WIDTH, HEIGHT), method=Image.Resampling.LANCZOS)
    fitted = fit(png, WIDTH, HEIGHT)

    def pillow_jpeg() -> bytes:
        buffer = io.BytesIO()
        sample_fitted.save(buffer, format="JPEG", quality=90, optimize=True)
        return buffer.getvalue()

    jpeg = pillow_jpeg()
    reference = prepare_video_reference(png, WIDTH, HEIGHT)
    wrap = lambda j: json.dumps(  # noqa: E731
        {"image_url": "data:image/jpeg;base64," + base64.b64encode(j).decode("ascii")}, separators=(",", ":")
    )
    return {
        "sample": {
            "PNG decode + convert('RGB') (full image)": med(decode_rgb),
            "ImageOps.fit LANCZOS": med(lambda: ImageOps.fit(full, (WIDTH, HEIGHT), method=Image.Resampling.LANCZOS)),
            "JPEG q90 optimize": med(pillow_jpeg),
            "base64 + JSON": med(lambda: wrap(jpeg)),
            "multipart (urllib3)": med(lambda: sample_build_video_multipart(jpeg, REQUEST, MODEL_ID)),
        },
        "ours": {
            "sequential PNG decode + Lanczos-3 shrink + centre crop (libvips)": med(lambda: fit(png, WIDTH, HEIGHT)),
            "JPEG Q90 4:2:0 optimize_coding (libvips)": med(lambda: encode_jpeg(fitted, 90)),
            "base64 + JSON": med(lambda: wrap(jpeg)),
            "multipart (urllib3, ours)": med(lambda: build_video_request(REQUEST, reference, model_id=MODEL_ID)),
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
    out = (
        args.out
        if args.out is not None
        else ("-" if args.quick else str(REPO / "docs" / "benchmarks" / "video-request-prep.md"))
    )
    kinds = IMAGE_KINDS[:1] if args.quick else IMAGE_KINDS

    started = time.perf_counter()
    pngs = [make_test_png(kind, seed) for kind, seed in kinds]

    # Quality first (one call each), then the checks that all three produce an equivalent request.
    quality: dict[str, list[tuple[float, float, int, int, int]]] = {name: [] for name in METHODS}
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
            quality[name].append(
                (
                    ssim(_luma(pixels), _luma(reference)),
                    psnr(pixels, reference),
                    len(jpeg),
                    len(body),
                    len(fields["image_reference"].encode()),
                )
            )
        without_image = [{k: v for k, v in f.items() if k != "image_reference"} for f in parsed.values()]
        assert all(f == without_image[0] for f in without_image), without_image
    ImageFile.LOAD_TRUNCATED_IMAGES = False

    times = time_methods(pngs, reps, warmup=5)
    stages = stage_times(pngs[0], max(10, reps // 3))
    if args.profile:
        print(profile_ours(pngs[0], 20))

    med = {name: statistics.median(values) for name, values in times.items()}
    n_img = len(pngs)
    per_image_ms = {name: [statistics.median(times[name][i::n_img]) for i in range(n_img)] for name in METHODS}
    speedups = [per_image_ms["sample"][i] / per_image_ms["ours"][i] for i in range(n_img)]
    # Worst per-image SSIM difference to the sample (negative = worse than the sample).
    diffs = [quality["ours"][i][0] - quality["sample"][i][0] for i in range(n_img)]
    worst = max(diffs, key=abs)
    largest_part = max(q[4] for q in quality["ours"])
    rows = []
    for name in METHODS:
        q = quality[name]
        rows.append(
            f"| {name} | {med[name]:.2f} | {quantile(times[name], 0.95):.2f} | "
            f"{statistics.mean(r[2] for r in q):,.0f} | {statistics.mean(r[3] for r in q):,.0f} | "
            f"{statistics.mean(r[0] for r in q):.4f} | {statistics.mean(r[1] for r in q):.2f} | "
            f"{med['sample'] / med[name]:.2f}x |"
        )
    per_image = "\n".join(
        f"| {kind} | {len(png):,} | {per_image_ms['sample'][i]:.2f} | {per_image_ms['ours'][i]:.2f} | "
        f"**{speedups[i]:.2f}x** | {quality['sample'][i][0]:.4f} | {quality['ours'][i][0]:.4f} | {diffs[i]:+.4f} | "
        f"{quality['sample'][i][2]:,} | {quality['ours'][i][2]:,} |"
        for i, ((kind, _), png) in enumerate(zip(kinds, pngs, strict=True))
    )
    stage_rows = "\n".join(
        f"| {method} | {stage} | {ms:.2f} |" for method, parts in stages.items() for stage, ms in parts.items()
    )
    met = min(speedups) >= 1.5 and abs(worst) <= 0.005 and largest_part < MAX_TEXT_PART_BYTES
    text = f"""## Video request preparation (`bench/video_request_prep.py`)

Command: `.venv-dev/bin/python bench/video_request_prep.py{" --quick" if args.quick else ""}` ({reps} timed calls per
method and image). Machine: {machine()}. Date: {today()}. Run time: {time.perf_counter() - started:.0f} s. Load
average at the end: {os.getloadavg()[0]:.1f} (other sessions share the 2 CPUs; both methods are interleaved call by
call, so the ratio is fair even when absolute times are noisy).

Input: {n_img} deterministic photo-like 1024x1024 RGB PNGs (gradients, 1/f texture, shapes, thin lines,
grain; Pillow's default PNG encoder, as the image container uses). Output: the full /v1/videos/sync multipart
body (10 text parts, 480x320 JPEG data URL in `image_reference`). `sample` is the AWS sample's calls verbatim
(`convert("RGB")` of the full image -> `ImageOps.fit` LANCZOS -> JPEG q90 `optimize=True` -> base64 -> urllib3
multipart); `ours` is what GenerateImage runs (`reference_image.prepare_video_reference`, libvips
{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)} through pyvips {pyvips.__version__}, +
`build_video_request`).
Quality is measured on the staged body parsed back, against a float64 Lanczos-3 resize of the original over the
exact centre-crop box (no rounding, no JPEG).

| method | median ms | p95 ms | JPEG bytes | body bytes | SSIM | PSNR dB | speed vs sample |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Per image (median ms of that image's calls):

| image | PNG bytes | sample ms | ours ms | speed-up | SSIM sample | SSIM ours | SSIM diff | JPEG sample | JPEG ours |
|---|---|---|---|---|---|---|---|---|---|
{per_image}

Stage medians (each stage timed alone on image 1):

| method | stage | median ms |
|---|---|---|
{stage_rows}

Target: >= 1.5x on every test image, worst SSIM difference within +-0.005, JPEG part < 1 MiB. Result: slowest image
{min(speedups):.2f}x, worst SSIM difference {worst:+.4f}, largest `image_reference` part {largest_part:,} bytes ->
{"**met**" if met else "**missed**"}.
"""
    emit("video_request_prep", text, out)


if __name__ == "__main__":
    main()
