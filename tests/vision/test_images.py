"""A corpus of odd and hostile files: each gives a clean RGB image or a one-line ImageError."""

import io
import os
import struct
import threading
import time
import zlib

import numpy as np
import pytest
from PIL import Image

from dlguide_core.errors import ImageError
from dlguide_core.vision import images
from dlguide_core.vision.images import MAX_FILE_BYTES, load_image


def _encode(img: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def _gradient(size=(64, 48)) -> Image.Image:
    w, h = size
    arr = np.zeros((h, w, 3), np.uint8)
    arr[..., 0] = np.linspace(0, 255, w, dtype=np.uint8)[None, :]
    arr[..., 1] = np.linspace(0, 255, h, dtype=np.uint8)[:, None]
    return Image.fromarray(arr)


def _png_header_only(width: int, height: int) -> bytes:
    """A valid PNG signature + IHDR claiming width x height, with a tiny (bogus) IDAT."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b"")


def _animated_gif() -> bytes:
    frames = [Image.new("RGB", (32, 32), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    return _encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)


def _exif_rotated() -> bytes:
    img = _gradient((80, 40))  # landscape pixels, EXIF says rotate 90 -> portrait
    exif = Image.Exif()
    exif[0x0112] = 6
    return _encode(img, "JPEG", exif=exif.tobytes())


GOOD = {
    "cmyk.jpg": lambda: _encode(_gradient().convert("CMYK"), "JPEG"),
    "gray16.png": lambda: _encode(Image.fromarray((np.arange(64 * 48).reshape(48, 64) * 20).astype(np.uint16)), "PNG"),
    "rgba.png": lambda: _encode(Image.new("RGBA", (40, 30), (255, 0, 0, 0)), "PNG"),
    "palette.png": lambda: _encode(_gradient().convert("P", palette=Image.Palette.ADAPTIVE), "PNG"),
    "palette_transparent.gif": lambda: _encode(_gradient().convert("P"), "GIF", transparency=0),
    "animated.gif": _animated_gif,
    "exif_rotated.jpg": _exif_rotated,
    "photo.webp": lambda: _encode(_gradient(), "WEBP"),
    "gray.bmp": lambda: _encode(_gradient().convert("L"), "BMP"),
    "bilevel.png": lambda: _encode(_gradient().convert("1"), "PNG"),
}

BAD = {
    "empty.jpg": (lambda: b"", "empty"),
    "text.jpg": (lambda: b"this is not an image, just text named .jpg\n" * 10, "not an image"),
    "random.bin": (lambda: np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes(), "not an image"),
    "truncated.jpg": (lambda: _encode(_gradient((256, 256)), "JPEG")[:600], "truncated"),
    "bomb.png": (lambda: _png_header_only(15000, 12001), "too large"),  # 180,015,000 pixels
    "huge_dims.png": (lambda: _png_header_only(60000, 60000), "too large"),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_odd_but_valid_files_decode_to_rgb(name):
    img = load_image(GOOD[name](), name=name)
    assert img.mode == "RGB"
    assert img.width > 0 and img.height > 0


@pytest.mark.parametrize("name", sorted(BAD))
def test_hostile_files_give_one_line_errors(name):
    make, fragment = BAD[name]
    with pytest.raises(ImageError) as info:
        load_image(make(), name=name)
    message = str(info.value)
    assert "\n" not in message and name in message and fragment in message


def test_corpus_is_at_least_twelve_files():
    assert len(GOOD) + len(BAD) >= 12


def test_exif_orientation_is_applied():
    assert load_image(_exif_rotated()).size == (40, 80)


def test_first_frame_of_animation_is_used():
    assert load_image(_animated_gif()).getpixel((5, 5)) == (255, 0, 0)


def test_transparency_becomes_white_not_black():
    assert load_image(GOOD["rgba.png"]()).getpixel((0, 0)) == (255, 255, 255)


def test_sixteen_bit_keeps_its_range():
    arr = np.full((8, 8), 65535, np.uint16)
    arr[0, 0] = 0
    img = load_image(_encode(Image.fromarray(arr), "PNG"))
    assert img.getpixel((1, 1)) == (255, 255, 255) and img.getpixel((0, 0)) == (0, 0, 0)


def test_pixel_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("DLGUIDE_MAX_IMAGE_PIXELS", "1000")
    with pytest.raises(ImageError, match="too large"):
        load_image(_encode(_gradient((64, 48)), "PNG"))


def test_missing_path_is_an_image_error(tmp_path):
    with pytest.raises(ImageError, match="cannot read"):
        load_image(tmp_path / "nope.jpg")


def test_only_the_upload_formats_are_decoded_whatever_the_name():
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n"
    with pytest.raises(ImageError, match="not an image"):
        load_image(eps, name="photo.png")  # never handed to Ghostscript
    with pytest.raises(ImageError, match="not an image"):
        load_image(_encode(_gradient(), "TIFF"), name="scan.jpg")


def test_the_pixel_limit_is_ours_not_pillows(monkeypatch):
    # 9,500 x 10,000 = 95 MP: above Pillow's warning threshold, below a 100 MP limit,
    # so it is decoded (and found truncated), not refused as a bomb.
    monkeypatch.setenv("DLGUIDE_MAX_IMAGE_PIXELS", "100000000")
    with pytest.raises(ImageError, match="truncated or corrupt"):
        load_image(_png_header_only(9500, 10000), name="big.png")
    monkeypatch.setenv("DLGUIDE_MAX_IMAGE_PIXELS", "90000000")
    with pytest.raises(ImageError, match="too large"):
        load_image(_png_header_only(9500, 10000), name="big.png")


# ------------------------------------------------------------- bounded memory and what is not a file (issue 18)


def test_the_default_limit_refuses_what_no_photo_needs():
    # 11000 x 9000 RGBA (99 MP) passed the old 100 MP default and decoded to 400 MB.
    with pytest.raises(ImageError, match="too large .11000x9000"):
        load_image(_png_header_only(11000, 9000), name="big.png")


@pytest.mark.parametrize("value", ["1e9", "-5", "lots", "999999999999"])
def test_a_bad_pixel_limit_setting_is_one_line(monkeypatch, value):
    monkeypatch.setenv("DLGUIDE_MAX_IMAGE_PIXELS", value)
    with pytest.raises(ImageError, match="DLGUIDE_MAX_IMAGE_PIXELS must be a whole number from 1 to"):
        load_image(_encode(_gradient(), "PNG"))


def test_a_large_jpeg_decodes_straight_to_the_size_the_model_needs():
    img = load_image(_encode(_gradient((4000, 3000)), "JPEG"), min_side=299)
    assert 299 <= min(img.size) < 2 * 299 and img.mode == "RGB"
    assert abs(img.size[0] / img.size[1] - 4 / 3) < 0.02


def test_a_large_png_with_alpha_is_reduced_before_any_conversion():
    rgba = Image.new("RGBA", (3000, 2400), (0, 0, 0, 0))  # fully transparent: white once composited
    img = load_image(_encode(rgba, "PNG"), min_side=299)
    assert 299 <= min(img.size) < 2 * 299 and img.getpixel((10, 10)) == (255, 255, 255)
    rotated = Image.new("RGB", (1200, 700))
    exif = rotated.getexif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    assert load_image(_encode(rotated, "JPEG", exif=exif), min_side=299).size[0] < 700  # portrait after EXIF


def test_no_more_decodes_at_once_than_the_limit(monkeypatch):
    running, peak, lock = [0], [0], threading.Lock()
    real_load = Image.Image.load

    def slow_load(self):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)  # long enough that 8 threads started together overlap, even on a loaded machine
        try:
            return real_load(self)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(Image.Image, "load", slow_load)
    data = _encode(_gradient(), "PNG")
    threads = [threading.Thread(target=load_image, args=(data,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == images.DEFAULT_MAX_DECODES


def test_a_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "photo.jpg"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: outcome.append(pytest.raises(ImageError, load_image, fifo).value),
                              daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # the old code blocked in open() until a writer came: unblock it, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO hung")
    assert "not a regular file" in str(outcome[0])


def test_devices_and_huge_files_are_refused_unread(tmp_path):
    with pytest.raises(ImageError, match="not a regular file"):
        load_image("/dev/zero")
    huge = tmp_path / "huge.png"
    with open(huge, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ImageError, match="file too large"):
        load_image(huge)
