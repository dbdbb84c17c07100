"""Deterministic, prompt-derived pictures (the emulator's stand-in for a diffusion model).

The palette comes from a hash of the prompt alone (so one prompt keeps its colours across seeds), the composition
(gradient angle, glow, waves, shapes) from a hash of (prompt, seed), and the prompt text is drawn on the image.

Every test job renders one (1024x1024 by default), so the smooth background is computed on a quarter-size grid and
scaled up (bilinear: the waves are at most 9 cycles across, 28 grid points a cycle), and each thread keeps its fonts:
a 1024x1024 picture took ~65 ms of CPU, most of it full-size float arithmetic.
"""

from __future__ import annotations

import hashlib
import io
import textwrap
import threading

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def _palette(prompt: str) -> np.ndarray:
    rng = _rng("palette", prompt)
    hues = (rng.uniform(0, 1) + np.array([0.0, 0.33, 0.6]) + rng.uniform(-0.08, 0.08, 3)) % 1.0
    sats = rng.uniform(0.45, 0.9, 3)
    vals = rng.uniform(0.55, 0.95, 3)
    return np.stack([_hsv_to_rgb(h, s, v) for h, s, v in zip(hues, sats, vals, strict=True)]).astype(np.float32)


def _hsv_to_rgb(h: float, s: float, v: float) -> np.ndarray:
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    rgb = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]
    return np.array(rgb) * 255.0


def render_prompt_image(prompt: str, seed: int, width: int, height: int, *, draw_text: bool = True) -> Image.Image:
    """An RGB image of exactly ``width`` x ``height``, deterministic from (prompt, seed, size)."""
    palette = _palette(prompt)
    rng = _rng("layout", prompt, seed)
    scale = BACKGROUND_SCALE if min(width, height) >= 4 * BACKGROUND_SCALE * 16 else 1
    grid_w, grid_h = -(-width // scale), -(-height // scale)
    y = np.linspace(0.0, 1.0, grid_h, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, grid_w, dtype=np.float32)[None, :]
    angle = rng.uniform(0, 2 * np.pi)
    t = x * np.float32(np.cos(angle)) + y * np.float32(np.sin(angle))
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    img = palette[0] * (1 - t)[..., None] + palette[1] * t[..., None]
    cx, cy, radius = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.45)
    glow = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / np.float32(radius**2)))[..., None] * np.float32(0.7)
    img = img * (1 - glow) + palette[2] * glow
    fx, fy, phase = rng.uniform(2, 9), rng.uniform(2, 9), rng.uniform(0, 2 * np.pi)
    waves = np.sin(np.float32(2 * np.pi * fx) * x + np.float32(phase)) * np.cos(np.float32(2 * np.pi * fy) * y)
    img = img * (1 + np.float32(0.08) * waves[..., None])
    image = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)

    draw = ImageDraw.Draw(image, "RGBA")
    scale = min(width, height)
    for _ in range(int(rng.integers(4, 10))):
        colour = (*(int(c) for c in palette[int(rng.integers(0, 3))]), int(rng.integers(70, 170)))
        px, py = rng.uniform(0, width), rng.uniform(0, height)
        size = rng.uniform(0.05, 0.22) * scale
        kind = int(rng.integers(0, 3))
        if kind == 0:
            draw.ellipse((px - size, py - size, px + size, py + size), fill=colour)
        elif kind == 1:
            draw.rectangle((px - size, py - size * 0.6, px + size, py + size * 0.6), fill=colour)
        else:
            points = [(px + size * np.cos(a), py + size * np.sin(a)) for a in rng.uniform(0, 2 * np.pi, 3)]
            draw.polygon(points, fill=colour)
    if draw_text and prompt.strip() and scale >= 48:
        _draw_caption(draw, prompt, width, height)
    return image


BACKGROUND_SCALE = 4  # the background's grid is this many times smaller than the picture (pictures from 256 px)
_fonts = threading.local()  # a FreeType face must not be used by two threads at once: each thread loads its own


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    cache = _fonts.__dict__.setdefault("by_size", {})
    if size not in cache:
        cache[size] = ImageFont.load_default(size=size)
    return cache[size]


def _draw_caption(draw: ImageDraw.ImageDraw, prompt: str, width: int, height: int) -> None:
    font_size = max(10, min(width, height) // 20)
    font = _font(font_size)
    char_w = max(1.0, float(font.getlength("n")))
    margin = max(4, font_size // 2)
    columns = max(8, int((width - 4 * margin) / char_w))
    max_lines = max(1, int(height * 0.35 / (font_size * 1.25)))
    lines = textwrap.wrap(" ".join(prompt.split()), columns)
    if len(lines) > max_lines:
        rest = textwrap.shorten(" ".join(lines[max_lines - 1 :]), columns, placeholder="...")
        lines = [*lines[: max_lines - 1], rest]
    line_h = int(font_size * 1.25)
    box_h = line_h * len(lines) + 2 * margin
    top = height - box_h - margin
    draw.rectangle((margin, top, width - margin, height - margin), fill=(0, 0, 0, 120))
    for i, line in enumerate(lines):
        draw.text((2 * margin, top + margin + i * line_h), line, font=font, fill=(255, 255, 255, 235))


def encode_image(image: Image.Image, output_format: str) -> bytes:
    """PNG (fast compression), JPEG or WebP bytes."""
    buf = io.BytesIO()
    if output_format == "png":
        image.save(buf, format="PNG", compress_level=1)
    elif output_format == "jpeg":
        image.convert("RGB").save(buf, format="JPEG", quality=90)
    elif output_format == "webp":
        image.save(buf, format="WEBP", quality=85)
    else:  # pragma: no cover - validated upstream
        raise ValueError(f"unsupported output_format {output_format!r}")
    return buf.getvalue()
