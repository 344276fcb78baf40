"""Pure helpers for training curves: TensorBoard-style smoothing and draw-time downsampling.

Storage keeps every step; only what is drawn is reduced, so a 100,000-step curve
stays responsive while its spikes stay visible.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

DEFAULT_MAX_POINTS = 2000


def ema(values: Sequence[float], smoothing: float) -> np.ndarray:
    """Debiased exponential moving average, as TensorBoard's smoothing slider (0 = raw, 0.99 = very smooth)."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError("smoothing must be in [0, 1)")
    series = pd.Series(np.asarray(values, dtype=np.float64))
    if smoothing == 0.0 or series.empty:
        return series.to_numpy()
    # adjust=True divides by the sum of the weights so far: the same debiasing TensorBoard applies.
    return series.ewm(alpha=1.0 - smoothing, adjust=True).mean().to_numpy()


def downsample(x: Sequence[float], y: Sequence[float], max_points: int = DEFAULT_MAX_POINTS
               ) -> tuple[np.ndarray, np.ndarray]:
    """At most about `max_points` points: per bucket, the min and the max in step order (spikes survive).

    NaN is ignored within a bucket; a bucket that is all NaN (a diverged run: Keras passes NaN losses
    through) keeps its first point, so the curve shows a gap there instead of the page crashing."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(xs) <= max_points:
        return xs, ys
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, len(xs), buckets + 1, dtype=np.int64)
    keep = []
    for start, end in zip(edges[:-1], edges[1:]):
        if end <= start:
            continue
        chunk = ys[start:end]
        if np.isnan(chunk).all():
            keep.append(start)
            continue
        lo, hi = start + int(np.nanargmin(chunk)), start + int(np.nanargmax(chunk))
        keep.extend(sorted({lo, hi}))
    idx = np.asarray(keep, dtype=np.int64)
    return xs[idx], ys[idx]


def stride(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, max_points: int = DEFAULT_MAX_POINTS
           ) -> tuple[np.ndarray, np.ndarray]:
    """Every k-th point (for smooth curves, where min/max buckets add nothing), always keeping the last."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(xs) <= max_points:
        return xs, ys
    idx = np.unique(np.append(np.arange(0, len(xs), int(np.ceil(len(xs) / max_points))), len(xs) - 1))
    return xs[idx], ys[idx]
