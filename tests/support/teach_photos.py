"""Easy photos to teach the booth (issue 44): each name a colour, each photo that colour with its own noise and tint,
so the untrained stand-in model's features still tell them apart. `thing_jpeg` is the served and page tests' kind: a
flat colour with a pale shape on it."""

from __future__ import annotations

import io
import random

import numpy as np
from PIL import Image, ImageDraw

EASY = {"tomato red": (220, 30, 30), "leaf green": (30, 200, 40), "sky blue": (30, 40, 220)}


def easy_photo(rgb: tuple[int, int, int], seed: int, size: tuple[int, int] = (160, 120)) -> Image.Image:
    rng = np.random.default_rng(seed)
    pixels = (np.array(rgb, float)[None, None, :] + rng.normal(0, 20, (size[1], size[0], 3))
              + rng.normal(0, 25, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def easy_jpeg(rgb: tuple[int, int, int], seed: int) -> bytes:
    buffer = io.BytesIO()
    easy_photo(rgb, seed).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def thing_jpeg(colour: tuple[int, int, int], seed: int) -> bytes:
    """An easy photo of a "thing": its colour, a little lighter or darker, with a pale shape somewhere on it."""
    rng = random.Random(seed)
    shade = tuple(max(0, min(255, c + rng.randint(-25, 25))) for c in colour)
    img = Image.new("RGB", (320, 240), shade)
    x, y = rng.randint(20, 180), rng.randint(20, 120)
    ImageDraw.Draw(img).ellipse([x, y, x + 90, y + 90], fill=(235, 235, 225))
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG")
    return buffer.getvalue()
