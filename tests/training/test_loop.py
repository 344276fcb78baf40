"""training: real steps on generated data; loss goes down; checkpoints resume exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dlguide_core.errors import WeightsUnavailable
from dlguide_core.training.configs import RunContext
from dlguide_core.training.factories import create_model, resolve_device
from dlguide_core.training.loop import run_recipe
from dlguide_core.training.recipes import get_recipe
from dlguide_core.vision.checkpoints import load_checkpoint
from dlguide_core.vision.classify import classify_sources
from dlguide_core.vision.models import load_model
from tests.support.sinks import RecordingSink
from tests.support.toy_data import write_toy_dataset


def run(recipe: str, ctx_dir: Path, sink: RecordingSink, resume: bool = False, **fields):
    cfg = get_recipe(recipe).make_config(workers=0, device="cpu", **fields)
    return run_recipe(cfg, RunContext("test-job", recipe, ctx_dir, sink, resume=resume))


def test_cifar_net_loss_goes_down_on_a_learnable_toy(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=16, val_per_class=4)
    sink = RecordingSink()
    result = run("cifar_net", tmp_path / "job", sink, data=str(data), epochs=4, lr=0.01)
    losses = [s["loss"] for s in sink.steps]
    assert result.status == "completed" and result.step == len(losses) == 4 * 12
    assert sum(losses[-8:]) / 8 < 0.5 * sum(losses[:8]) / 8
    assert [s["step"] for s in sink.steps] == list(range(1, 49))
    epoch, metrics = sink.epochs[-1]
    assert epoch == 3 and metrics["top1"] >= 90.0 and metrics["top5"] == 100.0
    assert set(metrics["per_class"]) == {"class_0", "class_1", "class_2"}  # the guide's per-class accuracy
    assert sink.plan["total_steps"] == 48 and sink.plan["start_step"] == 0


def test_stop_and_resume_continue_the_same_run_exactly(tmp_path: Path) -> None:
    data = str(write_toy_dataset(tmp_path / "toy", classes=2, per_class=10, val_per_class=2))
    straight = RecordingSink()
    run("cifar_net", tmp_path / "a", straight, data=data, epochs=2, lr=0.01)
    first = RecordingSink(stop_after=7)  # mid-epoch (5 steps per epoch)
    stopped = run("cifar_net", tmp_path / "b", first, data=data, epochs=2, lr=0.01)
    assert stopped.status == "stopped" and stopped.step == 7 and first.checkpoints[-1][1] == {"step": 7, "epoch": 1}
    second = RecordingSink()
    done = run("cifar_net", tmp_path / "b", second, resume=True, data=data, epochs=2, lr=0.01)
    assert done.status == "completed" and [s["step"] for s in second.steps] == [8, 9, 10]
    assert first.plan["start_step"] == 0 and first.plan["start_epoch"] == 0
    assert second.plan["start_step"] == 7 and second.plan["start_epoch"] == 1  # the store trims past here
    resumed = [s["loss"] for s in first.steps + second.steps]
    assert resumed == pytest.approx([s["loss"] for s in straight.steps], rel=1e-5)
    assert second.epochs[-1][1]["train_loss"] == pytest.approx(straight.epochs[-1][1]["train_loss"], rel=1e-5)


class CancelInValidation(RecordingSink):
    """Asks to stop once the validation pass after step `at` has begun (the loop's first ask after that step)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.asked_after = at, 0

    def should_stop(self) -> bool:
        if len(self.steps) < self.at:
            return False
        self.asked_after += 1
        return self.asked_after > 1  # the first ask is the training loop's, right after the step


def test_a_cancel_during_validation_stops_there_and_the_resume_validates_again(tmp_path: Path) -> None:
    """Issue 31, 6: a cancel no longer waits for the end of the validation pass; no half-scored epoch is kept."""
    data = str(write_toy_dataset(tmp_path / "toy", classes=2, per_class=10, val_per_class=4))
    straight = RecordingSink()
    run("cifar_net", tmp_path / "a", straight, data=data, epochs=2, lr=0.01, batch_size=4)
    first = CancelInValidation(at=5)  # 5 steps per epoch: stopped in epoch 0's validation
    stopped = run("cifar_net", tmp_path / "b", first, data=data, epochs=2, lr=0.01, batch_size=4)
    assert stopped.status == "stopped" and stopped.step == 5 and first.epochs == []
    assert first.checkpoints[-1][1] == {"step": 5, "epoch": 0}
    second = RecordingSink()
    done = run("cifar_net", tmp_path / "b", second, resume=True, data=data, epochs=2, lr=0.01, batch_size=4)
    assert done.status == "completed" and [s["step"] for s in second.steps] == [6, 7, 8, 9, 10]
    assert [e for e, _ in second.epochs] == [0, 1]  # epoch 0 validated on resume, with no step trained again
    assert second.epochs[0][1]["top1"] == pytest.approx(straight.epochs[0][1]["top1"])


@pytest.mark.slow
def test_inception_v3_trains_at_a_small_size_and_its_checkpoint_classifies(tmp_path: Path, sample_jpeg) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=3, val_per_class=1, size=80)
    sink = RecordingSink()
    result = run("inception_v3", tmp_path / "job", sink, data=str(data), image_size=75, batch_size=3,
                 weights="none", max_steps=2, label_smoothing=0.1)
    assert result.status == "completed" and [s["step"] for s in sink.steps] == [1, 2]
    assert all(torch.isfinite(torch.tensor(s["loss"])) for s in sink.steps)
    ckpt = load_checkpoint(result.checkpoint)
    for key in ("arch", "arch_kwargs", "class_names", "preset", "model", "optimizer", "scheduler", "scaler",
                "epoch", "step", "config", "job_id", "recipe"):
        assert key in ckpt, key
    assert ckpt["arch_kwargs"]["num_classes"] == 2 and ckpt["preset"]["crop"] == 75 and ckpt["step"] == 2
    assert not any(k.startswith("AuxLogits") for k in ckpt["model"])  # the aux head is off, as in the guide
    loaded = load_model(str(result.checkpoint), device="cpu")
    (res,) = classify_sources(loaded, [("cat", sample_jpeg.read_bytes())], k=2)
    assert res.error is None and {p.label for p in res.top} == {"class_0", "class_1"}


def test_fine_tuning_from_a_checkpoint_replaces_the_head(tmp_path: Path) -> None:
    data3 = write_toy_dataset(tmp_path / "three", classes=3, per_class=4, val_per_class=1)
    first = run("cifar_net", tmp_path / "j1", RecordingSink(), data=str(data3), epochs=1)
    data2 = write_toy_dataset(tmp_path / "two", classes=2, per_class=4, val_per_class=1)
    second = run("cifar_net", tmp_path / "j2", RecordingSink(), data=str(data2), epochs=1,
                 weights=str(first.checkpoint))
    assert load_checkpoint(second.checkpoint)["model"]["fc3.weight"].shape == (2, 84)


def test_imagenet_weights_only_for_inception_and_cuda_needs_a_gpu(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    with pytest.raises(Exception, match="imagenet weights exist only for inception_v3"):
        run("cifar_net", tmp_path / "j", RecordingSink(), data=str(data), weights="imagenet")
    if not torch.cuda.is_available():
        with pytest.raises(Exception, match="sees no GPU"):
            resolve_device("cuda")
    assert resolve_device("cpu").type == "cpu"


class _FlushOrderSink(RecordingSink):
    """Records, at each flush, which steps had been reported and what the checkpoint file held."""

    def __init__(self, checkpoint: Path) -> None:
        super().__init__()
        self.checkpoint, self.flushes = checkpoint, []

    def flush(self) -> None:
        on_disk = load_checkpoint(self.checkpoint)["step"] if self.checkpoint.is_file() else 0
        self.flushes.append((len(self.steps), on_disk))


def test_steps_are_flushed_before_each_checkpoint_is_written(tmp_path: Path) -> None:
    """A kill between the checkpoint file and the store must never lose steps the file covers."""
    sink = _FlushOrderSink(tmp_path / "job" / "checkpoint.pt")
    run("cifar_net", tmp_path / "job", sink, data=str(write_toy_dataset(tmp_path / "toy", classes=2, per_class=5,
                                                                         val_per_class=1)), epochs=2)
    assert len(sink.flushes) == len(sink.checkpoints) >= 2
    assert {path for path, _ in sink.checkpoints} == {sink.checkpoint}
    for (reported, on_disk), (_, saved) in zip(sink.flushes, sink.checkpoints):
        assert on_disk < saved["step"] == reported  # flushed with every step reported, file not yet written


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """`count` GPUs as PyTorch would report them (none exist here); only the device rule is under test."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_auto_and_cuda_take_the_queues_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpus(monkeypatch, 2)
    assert [str(resolve_device(spec, slot)) for spec in ("auto", "cuda") for slot in (0, 1)] == \
        ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]  # two jobs booked on two GPUs get two GPUs
    assert str(resolve_device("cuda", 3)) == "cuda:1"  # more jobs than GPUs (DLGUIDE_MAX_JOBS): round-robin
    assert str(resolve_device("cuda:1", 0)) == "cuda:1"  # an explicit GPU wins over the slot
    assert str(resolve_device("cpu", 1)) == "cpu"
    with pytest.raises(Exception, match="sees 2 GPU"):
        resolve_device("cuda:2", 0)


def test_resnet50_fine_tuning_recipe_at_its_smallest_size(tmp_path: Path, monkeypatch) -> None:
    """The registry's ResNet-50 trains on the same ImageFolder data; its checkpoint keeps its presets and head."""
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1, size=64)
    result = run("resnet50", tmp_path / "job", RecordingSink(), data=str(data), image_size=64, batch_size=2,
                 weights="none", max_steps=1)
    ckpt = load_checkpoint(result.checkpoint)
    assert result.status == "completed" and ckpt["arch"] == "resnet50" and ckpt["step"] == 1
    assert (ckpt["preset"]["crop"], ckpt["preset"]["resize"]) == (64, 66)  # 232/224, not Inception's 342/299
    assert ckpt["model"]["fc.weight"].shape == (2, 2048)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty_torch_home"))  # offline (DLGUIDE_OFFLINE), not cached
    with pytest.raises(WeightsUnavailable, match="resnet50-11ad3fa6.pth") as info:  # its own, not Inception's
        create_model("resnet50", "imagenet", 2)  # the recipe's default weights
    assert "\n" not in str(info.value)
