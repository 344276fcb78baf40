"""The checkpoint file format shared by training, classification and export.

A checkpoint is a plain dict of tensors and primitives, so it loads with
`torch.load(..., weights_only=True)`. It carries everything needed to rebuild and
label the model: architecture, its kwargs, class names, preprocessing preset and
the recipe config (asdict of the frozen dataclass).
"""

from __future__ import annotations

import errno
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from dlguide_core.errors import CheckpointError, error_summary

FORMAT = "dlguide-checkpoint"
VERSION = 1
REQUIRED_KEYS = ("arch", "arch_kwargs", "class_names", "preset", "model")
MAX_CLASSES = 100_000  # ImageNet-21k has 21,841; a head wider than this is a broken or hostile file
MAX_NAME_CHARS = 512
MAX_IMAGE_SIDE = 4096  # a preset's resize/crop: Inception v3 wants 299, CIFAR 32


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
    except MemoryError:
        raise CheckpointError(f"{path.name}: not a loadable checkpoint (too large to load)") from None
    except Exception as exc:  # noqa: BLE001 - random bytes raise struct.error, KeyError, IndexError, Unicode...
        raise CheckpointError(f"{path.name}: not a loadable checkpoint ({error_summary(exc)})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path.name}: not a dlguide checkpoint (train with dlguide to make one)")
    if int(data.get("version", 0)) > VERSION:
        raise CheckpointError(f"{path.name}: written by a newer dlguide (format {data.get('version')})")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise CheckpointError(f"{path.name}: checkpoint lacks {', '.join(missing)}")
    problem = payload_problem(data)
    if problem:
        raise CheckpointError(f"{path.name}: {problem}")
    return data


def payload_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a loaded checkpoint's fields, in a few words, or None. Checked before anything is
    built from them, so a hostile or broken file cannot allocate a huge head or index past the names."""
    if not isinstance(data["arch"], str):
        return "arch is not a name"
    kwargs = data["arch_kwargs"]
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        return "arch_kwargs is not a dict of named options"
    if not all(isinstance(v, (bool, int, float, str, type(None))) for v in kwargs.values()):
        return "arch_kwargs holds values that are not plain numbers, flags or names"
    for key in ("class_names", "display_names"):
        problem = _names_problem(data.get(key), key) if key in data or key == "class_names" else None
        if problem:
            return problem
    count = len(data["class_names"])
    if "display_names" in data and data["display_names"] and len(data["display_names"]) != count:
        return f"{len(data['display_names'])} display names for {count} classes"
    classes = kwargs.get("num_classes", count)
    if isinstance(classes, bool) or not isinstance(classes, int) or not 1 <= classes <= MAX_CLASSES:
        return f"num_classes must be a whole number from 1 to {MAX_CLASSES:,}, not {classes!r}"
    if classes != count:
        return f"the model has {classes} outputs but the file names {count} classes"
    model = data["model"]
    if not isinstance(model, dict) or not model or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items()):
        return "model is not a state dict (names -> tensors)"
    return _preset_problem(data["preset"])


def _names_problem(names: Any, key: str) -> str | None:
    if names is None and key == "display_names":
        return None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return f"{key} is not a list of names"
    if not 1 <= len(names) <= MAX_CLASSES:
        return f"{key} must hold 1 to {MAX_CLASSES:,} names, not {len(names):,}"
    if any(len(n) > MAX_NAME_CHARS for n in names):
        return f"{key} holds a name longer than {MAX_NAME_CHARS} characters"
    return None


# Pixels are in [0, 1]: a smaller std means nothing, and one like 1e-300 becomes 0 in float32 (a division by zero).
MIN_STD = 1e-6


def _preset_problem(preset: Any) -> str | None:
    from dlguide_core.vision.presets import EvalPreset

    if preset is None or preset == {}:
        return None  # the architecture's default preset applies
    if not isinstance(preset, dict):
        return "preset is not a dict"
    try:
        built = EvalPreset.from_dict(preset)
    except (TypeError, ValueError) as exc:
        return f"bad preset ({str(exc)[:200]})"
    sizes = (built.resize, built.crop)
    if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_IMAGE_SIDE for v in sizes):
        return f"preset resize and crop must be whole numbers from 1 to {MAX_IMAGE_SIDE}, not {sizes}"
    stats = (*built.mean, *built.std)
    if len(built.mean) != 3 or len(built.std) != 3 or not all(math.isfinite(v) for v in stats) or min(
            built.std) < MIN_STD:
        return f"preset mean and std must be 3 finite numbers each, std at least {MIN_STD:g}"
    return None
