"""diagnostics: a diverged run is named as such, with the hint a user needs; a healthy one is not."""

from __future__ import annotations

import math

from dlguide_core.training.diagnostics import training_warnings

RANDOM_INIT = {"lr": 0.1, "weights": "none"}
# The run that prompted this: Inception v3 from random init at the guide's lr 0.1.
DIVERGED = [2.4, 2.9, 3.6, 4.4, 5.9, 7.1, 8.8, 10.4, 12.2, 14.0, 16.1, 17.7]


def test_a_healthy_run_gets_no_warning() -> None:
    noisy_but_falling = [2.3 - 0.01 * s + (0.4 if s % 7 == 0 else 0.0) for s in range(200)]
    epochs = [{"epoch": 0, "train_loss": 2.0, "val_loss": 1.9}, {"epoch": 1, "train_loss": 1.2, "val_loss": 1.4}]
    assert training_warnings(noisy_but_falling, epochs, RANDOM_INIT) == []
    assert training_warnings([2.3, 2.4, 2.2], [], RANDOM_INIT) == []  # too short to say anything
    assert training_warnings([0.01, 0.02, 0.03, 0.05, 0.04, 0.06], [], RANDOM_INIT) == []  # tiny: doubling is noise


def test_a_runaway_loss_is_flagged_with_the_fine_tuning_hint() -> None:
    (warning,) = training_warnings(DIVERGED, [], RANDOM_INIT)
    assert warning.startswith("the loss rose from 2.9 to 16.1 over 12 steps: the run is diverging")
    assert "lr 0.1 is the guide's fine-tuning rate" in warning and "try 0.01, or start from ImageNet weights" in warning


def test_a_late_blow_up_after_progress_is_flagged() -> None:
    losses = [2.3 - 0.02 * s for s in range(100)] + [0.3 * 1.1 ** s for s in range(28)]
    (warning,) = training_warnings(losses, [], {"lr": 0.01, "weights": "imagenet"})
    assert "back up to" in warning and warning.endswith("try a lower learning rate (lr 0.01 -> 0.001)")


def test_nan_or_inf_losses_and_a_huge_val_loss_are_flagged() -> None:
    warnings = training_warnings([2.3, 2.2, None, None], [], {"lr": 0.001, "amp": True, "amp_dtype": "float16"})
    assert warnings == ["the loss became NaN at step 3 of 4: the run has diverged; fp16 autocast can overflow: "
                        "try --amp-dtype bf16, or a lower learning rate"]
    assert "infinite at step 2" in training_warnings([2.3, math.inf], [], {})[0]
    epochs = [{"epoch": 0, "train_loss": 5.3, "val_loss": 1e10}]
    (warning,) = training_warnings([2.3, 2.2, 2.1, 2.0, 1.9, 1.8], epochs, RANDOM_INIT)
    assert warning.startswith("the val loss reached 1e+10 at epoch 1: the model has diverged; lr 0.1")
