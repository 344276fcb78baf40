"""What decoding a large upload costs in memory (issue 18, point 3), measured in a fresh process: the peak
stays near one decoded copy (Pillow's RGBA reduce used to make a second, premultiplied one), and the memory
goes back to the system once the image is freed (it used to stay in the decoding thread's heap)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from dlguide_core.vision.images import _reduce

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys, threading
from dlguide_core.vision.images import load_image
data = open(sys.argv[1], "rb").read()
def status(key):  # VmHWM: this process's own high-water mark (ru_maxrss would carry the parent's over exec)
    line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024
def rss(): return status("VmRSS")
def peak(): return status("VmHWM")
before = rss(); peak_before = peak()
out = []
for _ in range(2):  # two visitors one after the other, each in a thread of its own as Streamlit's sessions
    visitor = threading.Thread(target=lambda: out.append(load_image(data, min_side=299)))
    visitor.start()
    visitor.join()
print(json.dumps({"peak": peak() - max(before, peak_before), "kept": rss() - before, "size": out[0].size}))
"""


def rgba_png(path: Path, size: tuple[int, int]) -> Path:
    img = Image.new("RGBA", size, (0, 0, 0, 0))
    img.paste((200, 120, 40, 255), (0, size[1] // 3, size[0], size[1] // 2))
    img.save(path, compress_level=1)
    return path


@pytest.mark.slow
def test_a_large_rgba_png_peaks_near_one_decoded_copy_and_is_given_back(tmp_path):
    size = (5000, 4000)  # 20 MP: 80 MB decoded
    decoded = size[0] * size[1] * 4
    done = subprocess.run([sys.executable, "-c", CHILD, str(rgba_png(tmp_path / "big.png", size))], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert min(seen["size"]) >= 299
    # One decoded copy plus the reducer's strips and the decoder's buffers: 1.27x on the dev box, 1.48x in CI's
    # serial run of stop 36 (why more there is not known). The RGBA reduce's second, premultiplied copy this guards
    # against puts the peak at 2x or more.
    assert seen["peak"] < 1.75 * decoded, f"peak {seen['peak'] / 2**20:.0f} MiB for {decoded / 2**20:.0f} MiB"
    assert seen["kept"] < 0.25 * decoded, f"kept {seen['kept'] / 2**20:.0f} MiB after the image was freed"


@pytest.mark.parametrize(("mode", "size"), [("RGBA", (1001, 777)), ("P", (640, 999)), ("RGB", (3000, 31)),
                                            ("LA", (500, 500))])
def test_the_reduce_in_strips_equals_a_whole_image_reduce(monkeypatch, mode, size):
    monkeypatch.setattr("dlguide_core.vision.images.STRIP_BYTES", 20_000)  # many strips, the last one short
    rgba = Image.effect_noise(size, 60).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(size))
    img = rgba.convert(mode) if mode != "P" else rgba.convert("RGB").quantize(64)
    whole_source = img if mode != "P" else img.convert("RGB")
    whole = whole_source.reduce(min(size) // 8)
    strips = _reduce(img, 8)
    assert strips.mode == whole.mode and strips.size == whole.size
    assert strips.tobytes() == whole.tobytes()
