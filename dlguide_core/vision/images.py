"""Decode untrusted image bytes into RGB PIL images, or refuse them in one line.

Handles EXIF orientation, grayscale, CMYK, palette and alpha, 16-bit and float
modes, and the first frame of animated files. Refuses empty files, non-images,
truncated files and decompression bombs before decoding their pixels; reads only
regular files, and at most MAX_FILE_BYTES of them.

Memory is bounded per image and per process (issue 18: a 403 KB PNG decoded to 400 MB):
given `min_side` (the model's resize), a JPEG decodes straight to a smaller scale
(`Image.draft`) and any other format is reduced right after decoding, before the
mode conversions that used to copy the full-resolution image three times; at most
DLGUIDE_MAX_DECODES images decode at once in a process.
"""

from __future__ import annotations

import functools
import io
import math
import os
import stat
import threading
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from dlguide_core.errors import ImageError, error_summary

# 50 MP: a full-resolution 48/50 MP phone photo or a 45 MP camera still passes; a PNG or WebP (which
# cannot decode at a smaller scale) then needs at most 200 MB while it decodes, not the 400 MB of 100 MP.
DEFAULT_MAX_PIXELS = 50_000_000
# Pillow refuses larger images itself, whatever we allow (its limit is None only where a program switched it off)
PILLOW_HARD_LIMIT = 2 * (Image.MAX_IMAGE_PIXELS or DEFAULT_MAX_PIXELS)
DEFAULT_MAX_DECODES = 2  # images decoding at once in one process (a server's visitors share it)
MAX_FILES_PER_UPLOAD = 16  # images one Classify upload classifies (the rest are named, not decoded)
HEADER_BYTES = 64 * 1024  # what a dataset scan reads of each file: every upload format's header fits
MAX_FILE_BYTES = 64 * 2**20  # a photo file; a device or a huge file is refused, not read into memory
STRIP_BYTES = 2 * 2**20  # the most of an image `_reduce` converts at once: see _large_blocks
PILLOW_BLOCK_BYTES = 2**30  # one block for any image under the pixel limit: see _large_blocks
UPLOAD_TYPES = ("jpg", "jpeg", "png", "webp", "bmp", "gif")
# Decoders Pillow may use, whatever the file is called: the upload types and nothing else, so a
# PostScript/EPS "photo" never reaches Ghostscript and rarely used decoders stay out of reach.
DECODERS = ("JPEG", "PNG", "WEBP", "BMP", "GIF")
# The file names a dataset folder's images carry: those of DECODERS (a .tif or .ppm would be refused when read).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif")


def max_pixels() -> int:
    """DLGUIDE_MAX_IMAGE_PIXELS, checked: ImageError in one line for a value that is not a whole number
    from 1 to Pillow's own hard limit (a larger one could never take effect)."""
    raw = os.environ.get("DLGUIDE_MAX_IMAGE_PIXELS", "").strip()
    if not raw:
        return DEFAULT_MAX_PIXELS
    value = int(raw) if raw.isdigit() else 0
    if not 1 <= value <= PILLOW_HARD_LIMIT:
        raise ImageError(f"DLGUIDE_MAX_IMAGE_PIXELS must be a whole number from 1 to {PILLOW_HARD_LIMIT:,} "
                         f"(default {DEFAULT_MAX_PIXELS:,}), not {raw[:40]!r}")
    return value


@functools.lru_cache(maxsize=1)
def decode_slots() -> threading.BoundedSemaphore:
    """The process-wide limit on images decoding at once (DLGUIDE_MAX_DECODES, default 2)."""
    raw = os.environ.get("DLGUIDE_MAX_DECODES", "").strip()
    return threading.BoundedSemaphore(int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_DECODES)


def load_image(source: bytes | str | Path, *, name: str | None = None, min_side: int | None = None) -> Image.Image:
    """Bytes or a path -> an RGB image; raises ImageError with a one-line reason.

    With `min_side` (e.g. the model preset's resize) the image comes back reduced to a shorter side of at
    least `min_side` (under twice that when reducing): all a model and a thumbnail need, and the full
    resolution never exists as more than one decoded buffer. Without it, full resolution."""
    label = name or (str(source) if not isinstance(source, bytes) else "upload")
    data = read_image_bytes(source, label)
    if not data:
        raise ImageError(f"{label}: the file is empty")
    img = _open_checked(data, label)
    _large_blocks()
    with decode_slots():
        try:
            img.seek(0)  # first frame of animated GIF/WebP/PNG
            if min_side:
                _draft(img, min_side)
            img.load()
            if min_side:
                img = _reduce(img, min_side)
            img = ImageOps.exif_transpose(img)
        except (OSError, SyntaxError, ValueError) as exc:
            raise ImageError(f"{label}: truncated or corrupt image ({error_summary(exc)})") from None
        return to_rgb(img)


def image_file_problem(path: str | Path) -> str | None:
    """Why the file at `path` is no usable image (one line), or None: the checks of `load_image` that need
    no pixel decoded (regular file, size, format, pixel limit). A dataset scan calls it for every file."""
    label = str(path)
    try:
        with open(path, "rb", opener=_open_no_block) as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                return f"{label}: not a regular file"
            if info.st_size == 0:
                return f"{label}: the file is empty"
            if info.st_size > MAX_FILE_BYTES:
                return f"{label}: file too large ({info.st_size:,} bytes; limit {MAX_FILE_BYTES:,})"
            head = fh.read(HEADER_BYTES)
    except OSError as exc:
        return f"{label}: cannot read file ({exc.strerror or exc})"
    try:
        _open_checked(head, label)
    except ImageError as exc:
        # A header cut off by our read (a file over HEADER_BYTES) is left to the decoder to judge.
        if info.st_size <= HEADER_BYTES or "unreadable image" not in str(exc):
            return str(exc)
    return None


def read_image_bytes(source: bytes | str | Path, label: str) -> bytes:
    """The bytes of an upload, or of a path that is a regular file of at most MAX_FILE_BYTES (a FIFO would
    hang the read, /dev/zero fill the memory)."""
    if isinstance(source, bytes):
        return source
    try:
        with open(source, "rb", opener=_open_no_block) as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ImageError(f"{label}: not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise ImageError(f"{label}: file too large ({info.st_size:,} bytes; limit {MAX_FILE_BYTES:,})")
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ImageError(f"{label}: cannot read file ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:  # the file grew while we read it
        raise ImageError(f"{label}: file too large (limit {MAX_FILE_BYTES:,} bytes)")
    return data


def _open_no_block(path: str, flags: int) -> int:
    # O_NONBLOCK: opening a FIFO with no writer returns at once (the regular-file check then refuses it).
    return os.open(path, flags | os.O_NONBLOCK)


def _draft(img: Image.Image, min_side: int) -> None:
    # JPEG decodes at 1/2, 1/4 or 1/8 scale, the largest that keeps the shorter side >= min_side.
    if img.format != "JPEG":
        return
    width, height = img.size
    scale = min_side / min(width, height)
    if scale < 0.5:
        img.draft("RGB" if img.mode in ("RGB", "YCbCr") else img.mode,
                  (math.ceil(width * scale), math.ceil(height * scale)))


def _reduce(img: Image.Image, min_side: int) -> Image.Image:
    # A box-filter reduction by a whole factor, keeping the shorter side >= min_side; modes whose
    # values are not intensities (palette, 1-bit, 16-bit) are converted first. Done in strips of rows
    # (a multiple of the factor, so the boxes are the very ones of a whole-image reduce): Pillow's
    # reduce of an RGBA image premultiplies alpha into a full-size copy, and a palette conversion makes
    # one too; per strip, neither is more than STRIP_BYTES (a 49.6 MP RGBA PNG peaked at 2x its 198 MB).
    factor = min(img.size) // min_side
    if factor < 2:
        return img
    width, height = img.size
    rows = max(1, STRIP_BYTES // (width * 4 * factor)) * factor
    reduced: Image.Image | None = None
    for top in range(0, height, rows):
        strip = img.crop((0, top, width, min(top + rows, height)))
        if strip.mode not in ("L", "LA", "RGB", "RGBA", "RGBX", "CMYK", "I", "F"):
            strip = to_rgb(strip)
        part = strip.reduce(factor)
        del strip
        if reduced is None:
            reduced = Image.new(part.mode, (-(-width // factor), -(-height // factor)))
        reduced.paste(part, (0, top // factor))
    if reduced is None:  # a 0-pixel-high image: nothing was read
        raise ImageError("the image has no pixels")
    reduced.info = img.info  # keeps the EXIF orientation for exif_transpose
    return reduced


@functools.lru_cache(maxsize=1)
def _large_blocks() -> None:
    # Pillow allocates an image in blocks of 16 MiB by default: under glibc's largest mmap threshold
    # (32 MiB), so once freed they stay in the heap of the thread that decoded (each Streamlit session
    # has its own thread and malloc arena; measured: +190 MiB kept per 198 MB decode). One block per
    # image instead: a decode of more than 32 MiB is one mmap, given back whole when the image is freed.
    # A block size that left a tail under 32 MiB (64 MiB blocks did), or strips of several MiB in
    # `_reduce`, put those chunks in the thread's heap, below the small answer allocated after them,
    # where glibc cannot trim them: an 80 MB RGBA PNG then kept 45 MiB in about one run in five
    # (tests/vision/test_image_memory.py); 2 MiB strips leave at most a strip or two behind. Set on
    # first decode, not at import; a small image (under 32 MiB) is allocated as before.
    Image.core.set_block_size(PILLOW_BLOCK_BYTES)


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
        raise ImageError(f"{label}: unreadable image ({error_summary(exc)})") from None
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


