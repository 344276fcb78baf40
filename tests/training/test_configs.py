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


# --- Issue 23: one validation and one device rule for every config family, declared in the fields' metadata.

def _families():
    """(config class, the fields it needs besides the one under test) of every config family."""
    from dlguide_core.jobs.evaluation_job import EvaluateConfig
    from dlguide_core.tf.configs import FashionMnistConfig, TextClassificationConfig

    return [(InceptionV3Config, {"data": "x"}), (CifarNetConfig, {"data": "x"}), (FashionMnistConfig, {}),
            (TextClassificationConfig, {}), (EvaluateConfig, {"weights": "imagenet", "data": "x"})]


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_every_config_family_accepts_the_same_devices(device):
    for cls, needs in _families():
        assert cls(**needs, device=device).device == device


@pytest.mark.parametrize("device", ["cuda:x", "cpu:0", "auto:1", "tpu", "cuda:", "", "rocm"])
def test_every_config_family_refuses_other_devices_in_the_same_words(device):
    messages = set()
    for cls, needs in _families():
        with pytest.raises(ConfigError) as refused:
            cls(**needs, device=device)
        messages.add(str(refused.value))
    assert messages == {f"device must be one of auto, cpu, cuda or cuda:N, not {device!r}"}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("lr", float("inf"), r"learning rate must be a number in \(0, 10\], not inf"),
    ("epochs", 0, r"epochs must be a whole number in \[1, 10000\], not 0"),
    ("batch_size", 2.5, "batch size must be a whole number"),
    ("max_steps", 0, r"max steps must be a whole number in \[1, 1e\+09\]"),
    ("seed", 2**70, r"seed must be a whole number in \[0, 4.29497e\+09\]"),
])
def test_every_family_names_the_same_range_for_the_same_field(field, value, message):
    families = [(cls, needs) for cls, needs in _families() if field in cls.__dataclass_fields__]
    assert len(families) >= 4
    for cls, needs in families:
        with pytest.raises(ConfigError, match=message):
            cls(**needs, **{field: value})


def test_a_recipe_that_changes_a_default_keeps_the_declared_range():
    with pytest.raises(ConfigError, match=r"epochs must be a whole number in \[1, 10000\], not 0"):
        CifarNetConfig(data="x", epochs=0)  # CifarNetConfig redeclares epochs = 2 without metadata
    with pytest.raises(ConfigError, match=r"label smoothing must be a number in \[0, 1\), not 1.0"):
        CifarNetConfig(data="x", label_smoothing=1.0)
