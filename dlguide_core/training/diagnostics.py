"""Is a run diverging? A pure reading of its stored losses, with the hint a user needs.

From random init at the guide's lr 0.1 (a fine-tuning rate), an Inception v3 job's loss went
2.4 -> 17.7 in 12 steps and its val loss to 1e10, and nothing said so. `training_warnings` turns
that into one-line warnings for `jobs show --json` (`warnings`) and the Train page. It never
changes a job's status: a diverged run may still be worth looking at, or may recover.

Plain Python on purpose: `jobs show` must answer without importing numpy or torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

MIN_STEPS = 6  # fewer steps say nothing about a trend
RISE_FROM_START = 2.0  # recent loss over the first steps' loss
RISE_FROM_BEST = 3.0  # recent loss over the best stretch so far (a late blow-up)
MIN_RISE = 1.0  # and by at least this much in absolute terms (a tiny loss may double harmlessly)
VAL_LOSS_CEILING = 100.0  # a cross-entropy this large means the predictions are confidently wrong
FINE_TUNING_LR = 0.05  # the guide's lr 0.1 is meant for starting from ImageNet weights


def training_warnings(losses: Sequence[float | None], epochs: Sequence[Mapping[str, Any]],
                      config: Mapping[str, Any]) -> list[str]:
    """Warnings for a run's per-step `losses` (the store keeps a NaN loss as None), its per-epoch rows
    (`epoch`, `train_loss`, `val_loss`) and its config (`lr`, `weights`, `amp`, `amp_dtype`)."""
    found = [w for w in (_non_finite(losses), _runaway(losses), _val_blow_up(epochs)) if w]
    if found:
        found[0] += f"; {_hint(config)}"
    return found


def _non_finite(losses: Sequence[float | None]) -> str | None:
    bad = next((i for i, v in enumerate(losses) if v is None or not math.isfinite(v)), None)
    if bad is None:
        return None
    value = losses[bad]
    kind = "NaN" if value is None or math.isnan(value) else "infinite"
    return f"the loss became {kind} at step {bad + 1} of {len(losses)}: the run has diverged"


def _runaway(losses: Sequence[float | None]) -> str | None:
    finite = [v for v in losses if v is not None and math.isfinite(v)]
    if len(finite) < MIN_STEPS:
        return None
    width = max(3, min(50, len(finite) // 10))
    medians = [statistics.median(finite[i:i + width]) for i in range(0, len(finite) - width + 1, width)]
    first, best, last = medians[0], min(medians), statistics.median(finite[-width:])
    if last > RISE_FROM_START * first and last - first > MIN_RISE:
        return f"the loss rose from {first:.3g} to {last:.3g} over {len(finite)} steps: the run is diverging"
    if last > RISE_FROM_BEST * best and last - best > MIN_RISE:
        return f"the loss rose from {best:.3g} back up to {last:.3g}: the run is diverging"
    return None


def _val_blow_up(epochs: Sequence[Mapping[str, Any]]) -> str | None:
    for row in epochs:
        val, train = row.get("val_loss"), row.get("train_loss")
        if val is None:
            continue
        if not math.isfinite(val) or val > max(VAL_LOSS_CEILING, 10 * (train or 0.0)):
            epoch = row.get("epoch")
            shown = epoch + 1 if isinstance(epoch, int) else "?"  # people count epochs from 1
            return f"the val loss reached {val:.3g} at epoch {shown}: the model has diverged"
    return None


def _hint(config: Mapping[str, Any]) -> str:
    lr, weights = config.get("lr"), config.get("weights")
    if isinstance(lr, int | float) and lr >= FINE_TUNING_LR and weights == "none":
        return (f"lr {lr:g} is the guide's fine-tuning rate (for ImageNet weights); from random init "
                f"try {lr / 10:g}, or start from ImageNet weights")
    if config.get("amp") and config.get("amp_dtype") == "float16":
        return "fp16 autocast can overflow: try --amp-dtype bf16, or a lower learning rate"
    if isinstance(lr, int | float):
        return f"try a lower learning rate (lr {lr:g} -> {lr / 10:g})"
    return "try a lower learning rate"
