"""The checkpoint file format shared by training, classification and export.

A checkpoint is a plain dict of tensors and primitives, so it loads with
`torch.load(..., weights_only=True)`. It carries everything needed to rebuild and
label the model: architecture, its kwargs, class names, preprocessing preset and
the recipe config (asdict of the frozen dataclass).
"""

from __future__ import annotations

import errno
import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from dlguide_core.errors import CheckpointError

FORMAT = "dlguide-checkpoint"
VERSION = 1
REQUIRED_KEYS = ("arch", "arch_kwargs", "class_names", "preset", "model")


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write atomically: a temp file in the same folder, fsync, then rename over `path`."""
    path = Path(path)
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise ValueError(f"checkpoint payload lacks {', '.join(missing)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save({"format": FORMAT, "version": VERSION, **payload}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except (OSError, RuntimeError) as exc:  # torch reports a full disk as "unexpected pos N vs M"
        if not (getattr(exc, "errno", None) == errno.ENOSPC or "unexpected pos" in str(exc)):
            raise
        kept = f"; the previous {path.name} is kept" if path.is_file() else ""
        raise CheckpointError(f"no space left on the device holding {path.parent}: free some space{kept}") from None
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load with weights_only=True and check it is ours; CheckpointError otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path.name}: not a loadable checkpoint ({first[:200]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path.name}: not a dlguide checkpoint (train with dlguide to make one)")
    if int(data.get("version", 0)) > VERSION:
        raise CheckpointError(f"{path.name}: written by a newer dlguide (format {data.get('version')})")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise CheckpointError(f"{path.name}: checkpoint lacks {', '.join(missing)}")
    return data
