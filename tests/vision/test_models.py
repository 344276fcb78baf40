import pickle

import pytest
import torch

from dlguide_core.errors import CheckpointError, WeightsUnavailable
from dlguide_core.vision import architectures, checkpoints, models
from dlguide_core.vision.architectures import INCEPTION_V3, RESNET50
from dlguide_core.vision.presets import CIFAR_EVAL


def test_imagenet_weights_hit_from_torch_home(fake_imagenet):
    assert models.imagenet_weights_path() == fake_imagenet
    loaded = models.load_model("imagenet", device="cpu")
    assert loaded.trained and loaded.source == "imagenet"
    assert loaded.arch_kwargs["transform_input"] is True  # Google's weights expect [-1, 1] inputs
    assert loaded.model.AuxLogits is None and not loaded.model.training
    assert len(loaded.class_names) == 1000 and loaded.class_names[258] == "Samoyed"


def test_imagenet_weights_miss_offline_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty_torch_home"))
    with pytest.raises(WeightsUnavailable) as info:
        models.load_model("imagenet")
    message = str(info.value)
    assert "inception_v3_google-0cc3c7bd.pth" in message
    assert str(tmp_path / "empty_torch_home" / "hub" / "checkpoints") in message
    assert "\n" not in message


def test_untrained_is_labelled_and_reproducible():
    a = models.load_model("none", device="cpu")
    b = models.load_model("none", device="cpu")
    assert not a.trained and "untrained" in a.label
    assert a.fingerprint == b.fingerprint


def _cifar_checkpoint(path, **extra):
    model = models.build_model("cifar_net", num_classes=3)
    payload = {"arch": "cifar_net", "arch_kwargs": {"num_classes": 3}, "class_names": ["a", "b", "c"],
               "preset": CIFAR_EVAL.to_dict(), "model": model.state_dict(), "recipe": "cifar_net",
               "config": {"lr": 0.001}, "epoch": 2, "job_id": "j1", **extra}
    return checkpoints.save_checkpoint(path, payload), model


def test_checkpoint_round_trip_rebuilds_model_and_labels(tmp_path):
    path, model = _cifar_checkpoint(tmp_path / "ck.pt")
    loaded = models.load_model(str(path), device="cpu")
    assert loaded.class_names == ("a", "b", "c") and loaded.preset == CIFAR_EVAL and loaded.trained
    assert "job j1" in loaded.label
    x = torch.randn(2, 3, 32, 32)
    model.eval()
    assert torch.allclose(loaded.model(x), model(x))


def test_foreign_and_corrupt_checkpoints_are_refused(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="not a dlguide checkpoint"):
        models.load_model(str(tmp_path / "foreign.pt"))
    (tmp_path / "garbage.pt").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(CheckpointError, match="not a loadable checkpoint"):
        models.load_model(str(tmp_path / "garbage.pt"))
    with pytest.raises(CheckpointError, match="not found"):
        models.load_model(str(tmp_path / "missing.pt"))


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_pickled_code_is_never_executed(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": checkpoints.FORMAT, "payload": _Evil()}, path, pickle_module=pickle)
    with pytest.raises(CheckpointError):
        checkpoints.load_checkpoint(path)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    _cifar_checkpoint(tmp_path / "ck.pt")
    _cifar_checkpoint(tmp_path / "ck.pt", epoch=3)
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]
    assert checkpoints.load_checkpoint(tmp_path / "ck.pt")["epoch"] == 3


def test_ddp_and_compile_prefixes_are_stripped():
    state = {"module._orig_mod.fc.weight": torch.zeros(1), "AuxLogits.fc.weight": torch.zeros(1)}
    assert list(models._strip_prefixes(state, INCEPTION_V3.ignored_keys)) == ["fc.weight"]


def test_job_checkpoints_are_weight_choices(isolated_home, tmp_path):
    _cifar_checkpoint(isolated_home / "jobs" / "abc" / "checkpoint.pt")
    choices = models.available_weights()
    assert choices[:2] == ["imagenet", "none"]
    assert choices[:-1] == list(architectures.named_sources())  # imagenet, none, then ARCH:imagenet for the others
    assert choices[-1].endswith("jobs/abc/checkpoint.pt")


def test_a_checkpoint_labels_with_its_readable_names(tmp_path):
    path, _ = _cifar_checkpoint(tmp_path / "ck.pt", display_names=["goldfish", "cat", "lemon"])
    assert models.load_model(str(path), device="cpu").class_names == ("goldfish", "cat", "lemon")


def test_resnet50_imagenet_is_a_weights_choice_fetched_like_inceptions(tmp_path, monkeypatch):
    """`resnet50:imagenet`: offered beside imagenet and none, offline one line naming its file and where it goes;
    cached, it loads with IMAGENET1K_V2's names, preset and label."""
    assert "resnet50:imagenet" in models.available_weights()
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    with pytest.raises(WeightsUnavailable) as info:
        models.load_model("resnet50:imagenet")
    message = str(info.value)
    assert "resnet50-11ad3fa6.pth" in message and str(tmp_path / "th" / "hub" / "checkpoints") in message
    assert "\n" not in message
    path = models.imagenet_weights_path(RESNET50)
    path.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(RESNET50.build().state_dict(), path)
    loaded = models.load_model("resnet50:imagenet", device="cpu")
    assert (loaded.arch, loaded.source, loaded.trained) == ("resnet50", "resnet50:imagenet", True)
    assert loaded.preset == RESNET50.imagenet.preset and loaded.preset.crop == 224 and "IMAGENET1K_V2" in loaded.label
    assert loaded.class_names[258] == "Samoyed"
