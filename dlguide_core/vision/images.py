"""Decode untrusted image bytes into RGB PIL images, or refuse them in one line.

Handles EXIF orientation, grayscale, CMYK, palette and alpha, 16-bit and float
modes, and the first frame of animated files. Refuses empty files, non-images,
truncated files and decompression bombs before decoding their pixels.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from dlguide_core.errors import ImageError

DEFAULT_MAX_PIXELS = 100_000_000  # 100 MP: above any phone camera, far below a bomb
UPLOAD_TYPES = ("jpg", "jpeg", "png", "webp", "bmp", "gif")
# Decoders Pillow may use, whatever the file is called: the upload types and nothing else, so a
# PostScript/EPS "photo" never reaches Ghostscript and rarely used decoders stay out of reach.
DECODERS = ("JPEG", "PNG", "WEBP", "BMP", "GIF")


def max_pixels() -> int:
    return int(os.environ.get("DLGUIDE_MAX_IMAGE_PIXELS", DEFAULT_MAX_PIXELS))


def load_image(source: bytes | str | Path, *, name: str | None = None) -> Image.Image:
    """Bytes or a path -> an RGB image, fully decoded; raises ImageError with a one-line reason."""
    label = name or (str(source) if not isinstance(source, bytes) else "upload")
    data = _read_bytes(source, label)
    if not data:
        raise ImageError(f"{label}: the file is empty")
    img = _open_checked(data, label)
    try:
        img.seek(0)  # first frame of animated GIF/WebP/PNG
        img.load()
        img = ImageOps.exif_transpose(img)
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{label}: truncated or corrupt image ({_short(exc)})") from None
    return to_rgb(img)


def _read_bytes(source: bytes | str | Path, label: str) -> bytes:
    if isinstance(source, bytes):
        return source
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise ImageError(f"{label}: cannot read file ({exc.strerror or exc})") from None


def _open_checked(data: bytes, label: str) -> Image.Image:
    limit = max_pixels()
    try:
        with warnings.catch_warnings():
            # Our own limit (checked below, before any pixel is decoded) governs; Pillow's warning
            # threshold (~89 MP) would otherwise undercut it. Pillow's hard error (~179 MP) stays.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=DECODERS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageError(f"{label}: image too large (decompression bomb refused)") from None
    except UnidentifiedImageError:
        raise ImageError(f"{label}: not an image, or a format Pillow cannot read") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{label}: unreadable image ({_short(exc)})") from None
    width, height = img.size
    if width <= 0 or height <= 0:
        raise ImageError(f"{label}: image has no pixels")
    if width * height > limit:
        raise ImageError(
            f"{label}: image too large ({width}x{height} = {width * height:,} pixels; limit {limit:,})"
        )
    return img


def to_rgb(img: Image.Image) -> Image.Image:
    """Any Pillow mode -> 8-bit RGB; transparency is composited onto white."""
    if img.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        img = _high_depth_to_l(img)
    if img.mode == "P":
        img = img.convert("RGBA") if "transparency" in img.info else img.convert("RGB")
    if img.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(background, rgba)
    return img.convert("RGB") if img.mode != "RGB" else img


def _high_depth_to_l(img: Image.Image) -> Image.Image:
    # 16-bit and 32-bit grayscale: scale the full range of the type (not the min/max
    # of this image) so a dark photo stays dark.
    arr = np.asarray(img).astype(np.float64)
    if img.mode == "F":
        peak = 1.0 if arr.size and float(np.nanmax(arr)) <= 1.0 else 255.0
    else:
        peak = 65535.0 if arr.size and float(arr.max()) > 255 else 255.0
    scaled = np.clip(np.nan_to_num(arr) / peak * 255.0, 0, 255).round().astype(np.uint8)
    return Image.fromarray(scaled)  # 2-D uint8 -> mode "L"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]
