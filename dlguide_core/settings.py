"""Where dlguide keeps its state and which folders users may pick data from.

DLGUIDE_HOME (default ./.dlguide) holds jobs, checkpoints, exports and caches.
DLGUIDE_DATA_ROOTS (os.pathsep-separated) lists the folders datasets may come from;
forms in the app pick among their children and never accept a typed path.
"""

from __future__ import annotations

import os
from pathlib import Path

from dlguide_core.errors import PathNotAllowed


def home() -> Path:
    path = Path(os.environ.get("DLGUIDE_HOME", ".dlguide")).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_roots() -> list[Path]:
    raw = os.environ.get("DLGUIDE_DATA_ROOTS")
    if raw:
        roots = [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]
    else:
        roots = [home() / "data"]
        roots[0].mkdir(parents=True, exist_ok=True)
    return [r.resolve() for r in roots if r.is_dir()]


def resolve_in_roots(path: str | Path, roots: list[Path] | None = None) -> Path:
    """Resolve `path` (symlinks included) and refuse it unless it lies inside a data root."""
    roots = data_roots() if roots is None else [r.resolve() for r in roots]
    resolved = Path(path).expanduser().resolve()
    if any(inside(resolved, root) for root in roots):
        return resolved
    names = ", ".join(str(r) for r in roots) or "(none configured)"
    raise PathNotAllowed(f"{path} is outside the configured data roots: {names}. Set DLGUIDE_DATA_ROOTS.")


def inside(path: str | Path, base: str | Path) -> bool:
    """Whether `path` is `base` or lies under it, both with symlinks resolved first: the one containment rule
    for reading from the data roots and for every write into a dataset (a symlinked class folder that
    points elsewhere is outside)."""
    resolved, base = Path(path).expanduser().resolve(), Path(base).expanduser().resolve()
    return resolved == base or base in resolved.parents


def booth_mode() -> bool:
    return os.environ.get("DLGUIDE_KIOSK", "").strip().lower() in {"1", "true", "yes", "on"}


# Cross-visitor batching (dlguide_core.inference.batching): the defaults are measured with bench/bench_kiosk_load.py
# (docs/BENCHMARKS.md, the booth under a crowd).
# An inference worker's largest batch: on a GPU a batch of 16 costs little more than one photo (the H200's booth ran
# 50 visitors in batches of 16); on a CPU a photo costs the same alone or in a batch, and ONNX Runtime int8's batch
# of 16 took 400-600 MB more of the booth's memory than one of 8 for the same throughput (bench/bench_kiosk_load.py,
# 50 visitors: 19.8/s and 1520 MB at 16, 20.8/s and 1096 MB at 8, 19.0/s and 1014 MB at 4; issue 30).
DEFAULT_MAX_BATCH, DEFAULT_MAX_BATCH_CPU = 16, 8
DEFAULT_BATCH_WAIT_MS = 0.0


def max_batch(*, on_gpu: bool) -> int:
    """DLGUIDE_MAX_BATCH: the most rows one inference worker runs in one forward (default 16 for a model on a GPU, 8
    on a CPU; a value that is not a positive whole number means the default)."""
    raw = os.environ.get("DLGUIDE_MAX_BATCH", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return DEFAULT_MAX_BATCH if on_gpu else DEFAULT_MAX_BATCH_CPU


def batch_wait_ms() -> float:
    """DLGUIDE_BATCH_WAIT_MS: how long a worker holds the oldest request for others to fill its batch (default 0:
    requests that arrive during a forward already form the next batch; a value that is not a number >= 0 means
    the default)."""
    raw = os.environ.get("DLGUIDE_BATCH_WAIT_MS", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_BATCH_WAIT_MS
    except ValueError:
        return DEFAULT_BATCH_WAIT_MS
    return value if 0 <= value <= 10_000 else DEFAULT_BATCH_WAIT_MS
