"""MIGraphX's compiled programs on disk: the .mxr cache's file names, atomic saves, and the compile time
recorded beside each file (<name>.mxr.json), which a later start that loads the file reports."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.inference.backend_base import BackendOptions
from dlguide_core.vision.models import LoadedModel


def compiled_path(loaded: LoadedModel, batch_size: int, options: BackendOptions, target: str) -> Path:
    """.mxr cache key: weights hash, batch size, precision, target and tuning."""
    tuned = "-tuned" if options.exhaustive_tune else ""
    name = f"{loaded.arch}-{loaded.fingerprint}-b{batch_size}-{options.precision}-{target}{tuned}.mxr"
    return settings.home() / "compiled" / name


def save_atomically(migraphx: Any, program: Any, path: Path, compile_s: float | None) -> None:
    """Save `program` at `path` (a temporary file renamed into place) with its compile time beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        migraphx.save(program, str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _sidecar(path).write_text(json.dumps({"compile_s": None if compile_s is None else round(compile_s, 3)}))


def read_compile_s(path: Path) -> float | None:
    """The compile time recorded beside a cached .mxr (None for a file compiled elsewhere)."""
    try:
        return float(json.loads(_sidecar(path).read_text())["compile_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")
