"""A learnable toy image dataset for tests and benchmarks (ImageFolder layout, no download)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

TOY_COLOURS = ((220, 40, 40), (40, 180, 60), (50, 70, 220), (230, 200, 40), (160, 60, 200), (40, 200, 210))


def write_toy_dataset(root: str | Path, *, classes: int = 3, per_class: int = 8, val_per_class: int = 2,
                      size: int = 32, seed: int = 0) -> Path:
    """A learnable ImageFolder (one noisy solid colour per class) for smoke runs, tests and benchmarks."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    for split, count in (("train", per_class), ("val", val_per_class)):
        for c in range(classes):
            folder = root / split / f"class_{c}"
            folder.mkdir(parents=True, exist_ok=True)
            base = np.array(TOY_COLOURS[c % len(TOY_COLOURS)], dtype=np.int16)
            for i in range(count):
                noise = rng.integers(-40, 41, size=(size, size, 3))
                pixels = np.clip(base + noise, 0, 255).astype(np.uint8)  # (S, S, 3)
                Image.fromarray(pixels).save(folder / f"{split}_{c}_{i}.png")
    return root


def bomb_png(width: int = 20000, height: int = 20000) -> bytes:
    """A PNG header claiming width x height (400 MP): refused by the pixel limit before any pixel."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))
            + struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND")))


def spoil(data: Path, split: str = "train") -> list[Path]:
    """A corrupt file, a dangling symlink and a decompression bomb in `split`/class_0."""
    folder = data / split / "class_0"
    corrupt, dangling, bomb = folder / "corrupt.jpg", folder / "dangling.jpg", folder / "bomb.png"
    corrupt.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    dangling.symlink_to(folder / "gone.jpg")
    bomb.write_bytes(bomb_png())
    return [corrupt, dangling, bomb]
