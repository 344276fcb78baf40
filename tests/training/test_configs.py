"""The config contract refuses, at submit, every value a job would die on later, naming the valid range
(issue 18 point 9); the CLI and the Train form both build configs, so both get the check."""

from __future__ import annotations

import pytest

from dlguide_core.cli.main import main
from dlguide_core.training.configs import CifarNetConfig, ConfigError, InceptionV3Config

BAD = [
    ("lr", float("inf"), r"learning rate must be a number in \(0, 10\], not inf"),
    ("lr", float("nan"), "learning rate must be a number in"),
    ("seed", 2**70, r"seed must be a whole number in \[0, 4.29497e\+09\]"),
    ("epochs", 10**30, r"epochs must be a whole number in \[1, 10000\]"),
    ("epochs", 1e30, "epochs must be a whole number"),
    ("weights", "", "weights must be imagenet, none or a checkpoint path, not empty"),
    ("weights", "   ", "not empty"),
    ("nproc_per_node", 100_000, r"processes per node must be a whole number in \[1, 64\]"),
    ("workers", 10**6, r"workers must be a whole number in \[0, 64\]"),
    ("image_size", 10**6, r"image size must be a whole number in \[1, 1024\]"),
    ("momentum", float("-inf"), "momentum must be a number in"),
    ("checkpoint_minutes", float("nan"), "checkpoint minutes must be"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD, ids=[f"{f}={v!r}" for f, v, _ in BAD])
def test_out_of_range_values_are_refused_naming_the_range(field, value, message):
    with pytest.raises(ConfigError, match=message):
        InceptionV3Config(data="x", **{field: value})


def test_the_guide_defaults_and_the_form_limits_are_accepted():
    InceptionV3Config(data="x")
    CifarNetConfig(data="x")
    InceptionV3Config(data="x", epochs=1000, batch_size=4096, lr=10.0, image_size=1024, workers=64,
                      seed=2**31 - 1, max_steps=10_000_000)


@pytest.mark.parametrize("flags", [["--lr", "inf"], ["--lr", "nan"], ["--seed", str(2**70)], ["--weights", ""],
                                   ["--workers", "100000"], ["--nproc-per-node", "100000"]])
def test_train_refuses_them_at_submit_in_one_line(tmp_path, capsys, flags):
    code = main(["train", "--recipe", "cifar_net", "--data", str(tmp_path), "--detach", *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "must be" in err
