"""A miniature tiny-imagenet-200 as its zip unpacks (train/<wnid>/images, val/images + annotations)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

WNIDS = ("n01443537", "n02124075", "n07749582")


def write_tiny_imagenet(root: Path, per_class: int = 3, val_per_class: int = 2, size: int = 16) -> Path:
    """The zip's layout: train/<wnid>/images/*.JPEG + boxes, val/images + val_annotations.txt."""
    lines = []
    for c, wnid in enumerate(WNIDS):
        images = root / "train" / wnid / "images"
        images.mkdir(parents=True)
        (root / "train" / wnid / f"{wnid}_boxes.txt").write_text("")
        for i in range(per_class):
            Image.new("RGB", (size, size), (80 * c, 40, 200 - 60 * c)).save(images / f"{wnid}_{i}.JPEG")
        for i in range(val_per_class):
            name = f"val_{c * val_per_class + i}.JPEG"
            (root / "val" / "images").mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (size, size), (80 * c, 40, 200 - 60 * c)).save(root / "val" / "images" / name)
            lines.append(f"{name}\t{wnid}\t0\t0\t{size}\t{size}")
    (root / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    (root / "wnids.txt").write_text("\n".join(WNIDS) + "\n")
    return root


def tree(root: Path) -> list[str]:
    """Every path under `root`, relative and sorted: to show that nothing moved."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
