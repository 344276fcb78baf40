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


# What one request body and one client address may cost a server (web/bodies.py, issue 43 P2 and P5): a body is read
# whole, with a deadline and a minimum rate, before it takes a slot of the booth's route or of the upload route, and
# one client address works on at most a few requests, and holds at most part of the upload budget, at once.
DEFAULT_BODY_DEADLINE_S = 60.0
DEFAULT_BODY_MIN_RATE = 16 * 1024  # bytes per second, averaged since the request came, after BODY_GRACE_S
BODY_GRACE_S = 5.0  # a body's first seconds are not held to the rate (a phone's radio waking up, TCP's slow start)
DEFAULT_CLIENT_SLOTS = 8
CLIENT_PENDING = 64  # bodies one client address may be sending at once; more get 429 at once
DEFAULT_CLIENT_UPLOAD_MB = 128


def _positive(name: str, default: float, upper: float) -> float:
    """The env var `name` as a number in (0, upper]; unset or anything else means `default`."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if 0 < value <= upper else default


def body_deadline_s() -> float:
    """DLGUIDE_BODY_DEADLINE_S: the most seconds a request's body (a booth photo, an upload) may take to arrive
    (default 60; a body still arriving then gets 408)."""
    return _positive("DLGUIDE_BODY_DEADLINE_S", DEFAULT_BODY_DEADLINE_S, 3600.0)


def body_min_rate() -> float:
    """DLGUIDE_BODY_MIN_RATE: the slowest a body may arrive, in bytes per second averaged since its request came,
    from BODY_GRACE_S on (default 16384; a body that falls behind gets 408)."""
    return _positive("DLGUIDE_BODY_MIN_RATE", DEFAULT_BODY_MIN_RATE, 2.0**40)


def client_slots() -> int:
    """DLGUIDE_CLIENT_SLOTS: requests of the booth's route, and uploads, that one client address has worked on at
    once (default 8); its others wait behind its own, never behind the other clients'."""
    return int(_positive("DLGUIDE_CLIENT_SLOTS", DEFAULT_CLIENT_SLOTS, 4096.0)) or DEFAULT_CLIENT_SLOTS


def client_upload_bytes() -> int:
    """DLGUIDE_CLIENT_UPLOAD_MB: the uploads all sessions of one client address may hold at once, in MB (default
    128, a quarter of the server's 512)."""
    return int(_positive("DLGUIDE_CLIENT_UPLOAD_MB", DEFAULT_CLIENT_UPLOAD_MB, 2.0**20) * 2**20)


# The booth's Teach (issue 44, dlguide_core.booth_teach): what one visitor may teach, and what all of them may hold.
# A visitor's state is each photo's features and logits (2048 + 1000 float32 for Inception v3: 12 KB a photo) and a
# head; at the caps one visitor holds 10 x 30 x 12 KB = 3.7 MB (bench/bench_booth_teach.py measures it), so the
# default memory bound (64 MB) holds 17 full visitors and the visitor cap (32) many more partial ones.
DEFAULT_TEACH_MAX_NAMES, DEFAULT_TEACH_MAX_PHOTOS = 10, 30
DEFAULT_TEACH_MAX_VISITORS, DEFAULT_TEACH_MAX_MB = 32, 64.0


def teach_max_names() -> int:
    """DLGUIDE_TEACH_MAX_NAMES: the names one visitor may teach (default 10)."""
    return int(_positive("DLGUIDE_TEACH_MAX_NAMES", DEFAULT_TEACH_MAX_NAMES, 1000.0))


def teach_max_photos() -> int:
    """DLGUIDE_TEACH_MAX_PHOTOS: the photos one visitor may show for one name (default 30)."""
    return int(_positive("DLGUIDE_TEACH_MAX_PHOTOS", DEFAULT_TEACH_MAX_PHOTOS, 1000.0))


def teach_max_visitors() -> int:
    """DLGUIDE_TEACH_MAX_VISITORS: visitors with taught names held at once (default 32); past it the least recently
    seen one is dropped."""
    return int(_positive("DLGUIDE_TEACH_MAX_VISITORS", DEFAULT_TEACH_MAX_VISITORS, 100_000.0))


def teach_max_bytes() -> int:
    """DLGUIDE_TEACH_MAX_MB: the memory all visitors' taught features and heads may hold, in MB (default 64); past it
    the least recently seen visitors are dropped."""
    return int(_positive("DLGUIDE_TEACH_MAX_MB", DEFAULT_TEACH_MAX_MB, 2.0**20) * 2**20)


def booth_weights_choice() -> str:
    """DLGUIDE_KIOSK_WEIGHTS, as set ("" unset): the booth's model, a dlguide checkpoint's path or `job:ID` (that
    training job's newest checkpoint); dlguide_core.booth_model resolves it."""
    return os.environ.get("DLGUIDE_KIOSK_WEIGHTS", "").strip()
