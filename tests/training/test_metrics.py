"""metrics: TensorBoard-style EMA and draw-time downsampling."""

from __future__ import annotations

import numpy as np
import pytest

from dlguide_core.training.metrics import downsample, ema, stride


def test_ema_is_debiased_like_tensorboard() -> None:
    values = [1.0, 2.0, 3.0]
    w = 0.5
    expected, last = [], 0.0
    for i, v in enumerate(values):
        last = last * w + (1 - w) * v
        expected.append(last / (1 - w ** (i + 1)))
    np.testing.assert_allclose(ema(values, w), expected)
    np.testing.assert_allclose(ema(values, 0.0), values)
    with pytest.raises(ValueError):
        ema(values, 1.0)


def test_downsample_keeps_spikes_and_bounds_points() -> None:
    y = np.ones(100_000)
    y[77_777] = 50.0
    x = np.arange(100_000)
    xs, ys = downsample(x, y, 2000)
    assert len(xs) <= 2000 and ys.max() == 50.0 and 77_777 in xs
    assert np.all(np.diff(xs) > 0)
    small_x, small_y = downsample([1, 2], [3, 4], 2000)
    assert list(small_x) == [1, 2] and list(small_y) == [3, 4]


def test_stride_keeps_the_last_point() -> None:
    xs, _ = stride(np.arange(10_001), np.arange(10_001), 1000)
    assert len(xs) <= 1001 and xs[-1] == 10_000


def test_downsample_survives_all_nan_buckets_of_a_diverged_run() -> None:
    # Keras passes NaN losses through: a diverged run's tail is all NaN, and buckets that are all NaN
    # keep one point (drawn as a gap) instead of raising "All-NaN slice encountered".
    y = np.concatenate([np.linspace(2.0, 5.0, 3000), np.full(3000, np.nan), [np.inf, 1.0]])
    xs, ys = downsample(np.arange(len(y)), y, 2000)
    assert len(xs) <= 2000 and np.all(np.diff(xs) > 0)
    assert np.isnan(ys).any() and np.isinf(ys).any() and ys[np.isfinite(ys)].max() == 5.0
    assert xs[0] == 0 and 2999 in xs  # the last finite point before the NaNs survives
