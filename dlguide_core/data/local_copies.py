"""Finding local copies of a dataset: the folders under the data roots, a few levels deep."""

from __future__ import annotations

from pathlib import Path


def candidate_folders(roots: list[Path], depth: int = 2) -> list[Path]:
    """The roots and their sub-folders down to `depth` levels (hidden ones skipped)."""
    found, level = [], [Path(r) for r in roots if Path(r).is_dir()]
    for _ in range(depth + 1):
        found += level
        level = [c for p in level for c in sorted(p.iterdir()) if c.is_dir() and not c.name.startswith(".")]
    return found
