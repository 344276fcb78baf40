"""On a GPU (CUDA, or ROCm through the same torch.cuda API): classification, AMP training jobs, device
slots, ONNX Runtime's GPU provider and Grad-CAM. Marked `gpu`: skipped with a reason on machines
without one (this project's CI), run on a lent GPU machine with `pytest -m gpu`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dlguide_core.cli.main import main
from dlguide_core.jobs import queue
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from dlguide_core.vision.classify import classify_sources
from dlguide_core.vision.models import load_model
from dlguide_core.vision.samples import bundled_samples
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import FINAL
from tests.support.waiting import wait_for as support_wait_for

pytestmark = pytest.mark.gpu

DOG = ROOT.parent / "shared" / "data" / "samples" / "dog.jpg"


def wait_for(predicate, timeout: float = 300.0):
    """tests.support.waiting.wait_for with room for a cold GPU's first CUDA initialisation."""
    return support_wait_for(predicate, timeout=timeout)


def photos() -> list[tuple[str, Path]]:
    found = list(bundled_samples().items())
    return found + ([("dog.jpg", DOG)] if DOG.is_file() else [])


def test_classification_on_the_gpu_agrees_with_the_cpu(fake_imagenet) -> None:
    cpu = classify_sources(load_model("imagenet", device="cpu"), photos())
    gpu_model = load_model("imagenet", device="cuda")
    assert gpu_model.device.type == "cuda"
    gpu = classify_sources(gpu_model, photos())
    for a, b in zip(cpu, gpu):
        assert [p.index for p in a.top] == [p.index for p in b.top], a.image
        for pa, pb in zip(a.top, b.top):
            assert abs(pa.prob - pb.prob) <= 1e-3, (a.image, pa, pb)


def gpu_config(tmp_path: Path, **fields):
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=48, val_per_class=4, size=64)
    return get_recipe("inception_v3").make_config(data=str(data), weights="none", device="cuda", lr=0.01,
                                                  batch_size=8, workers=2, image_size=299, **fields)


def job_device(job) -> str:
    """What the run said it trained on (training.loop.run_recipe prints it to the job's log)."""
    for line in Path(job.log_path).read_text().splitlines():
        if line.startswith("training on "):
            return line.split()[2]
    raise AssertionError(f"no device line in {job.log_path}")


@pytest.mark.slow
@pytest.mark.parametrize("amp_dtype", ["bf16", "fp16"])
def test_amp_channels_last_job_trains_cancels_and_resumes_on_the_gpu(tmp_path: Path, capsys, amp_dtype: str) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=48, val_per_class=4, size=64)
    code = main(["train", "--recipe", "inception_v3", "--data", str(data), "--weights", "none", "--device", "cuda",
                 "--lr", "0.01", "--batch-size", "8", "--workers", "2", "--epochs", "400", "--amp",
                 "--amp-dtype", amp_dtype, "--channels-last", "--detach", "--json"])
    assert code == 0
    store, job_id = JobStore(), json.loads(capsys.readouterr().out)["job_id"]
    assert store.get(job_id).config["amp"] and store.get(job_id).config["channels_last"]
    wait_for(lambda: (store.last_step(job_id) or {}).get("step", 0) >= 30)
    store.request_cancel(job_id)
    cancelled = wait_for(lambda: (j := store.get(job_id)).status in FINAL and j)
    assert cancelled.status == "cancelled", cancelled.error
    assert Path(cancelled.checkpoint).is_file() and cancelled.checkpoint_step >= 30
    assert job_device(cancelled).startswith("cuda")
    kept = cancelled.checkpoint_step
    queue.resume(store, job_id)
    wait_for(lambda: (store.last_step(job_id) or {}).get("step", 0) >= kept + 20)
    store.request_cancel(job_id)
    again = wait_for(lambda: (j := store.get(job_id)).status in FINAL and j)
    assert again.status == "cancelled", again.error
    steps = store.steps(job_id)
    assert steps["step"] == list(range(1, len(steps["step"]) + 1))  # continuing, no gap, no restart
    assert all(torch.isfinite(torch.tensor(steps["loss"])))
    checkpoint = load_model(again.checkpoint, device="cuda")  # the checkpoint classifies on the GPU
    assert len(classify_sources(checkpoint, photos())[0].top) == 3


@pytest.mark.slow
def test_two_queued_jobs_get_their_own_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two slots on one GPU: both run at once, slots 0 and 1, each on a GPU the process can see
    (slot i -> cuda:i modulo the visible GPUs; with one GPU both are cuda:0)."""
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "2")
    store = JobStore()
    cfg = gpu_config(tmp_path, epochs=1, max_steps=15)
    first, second = queue.submit(store, "inception_v3", cfg), queue.submit(store, "inception_v3", cfg)
    assert {first.slot, second.slot} == {0, 1}
    done = [wait_for(lambda j=j: (x := store.get(j.id)).status in FINAL and x) for j in (first, second)]
    assert [d.status for d in done] == ["succeeded", "succeeded"], [d.error for d in done]
    count = torch.cuda.device_count()
    assert [job_device(d) for d in done] == [f"cuda:{d.slot % count}" for d in done]


def test_onnxruntime_gpu_provider_runs_and_agrees_with_pytorch(fake_imagenet) -> None:
    from dlguide_core import onnxruntime_lib

    ort = onnxruntime_lib.load()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"this onnxruntime build has no CUDA provider ({ort.get_available_providers()}): "
                    "install onnxruntime-gpu")
    from dlguide_core.inference.backend_base import BackendOptions, sample_batch
    from dlguide_core.inference.benchmark import agreement
    from dlguide_core.inference.registry import prepare_backend

    loaded = load_model("imagenet", device="cuda")
    backend = prepare_backend("onnxruntime", loaded, batch_size=4, options=BackendOptions(target="gpu"))
    assert backend.describe().provider == "CUDAExecutionProvider"
    batch = sample_batch(loaded, 4)
    reference = prepare_backend("torch", loaded, batch_size=4).run(batch)
    agree = agreement(reference, backend.run(batch))
    assert agree["top1_agree"] == 1.0 and agree["top5_agree"] == 1.0
    assert agree["max_abs_diff"] <= 1e-3 * float(reference.abs().max()) * 10, agree


def test_gradcam_on_the_gpu_matches_the_cpu(fake_imagenet) -> None:
    import numpy as np

    from dlguide_core.vision.gradcam import grad_cam
    from dlguide_core.vision.images import load_image

    image = load_image(bundled_samples()["chelsea"])
    cpu = grad_cam(load_model("imagenet", device="cpu"), image)
    gpu_model = load_model("imagenet", device="cuda")
    before = {k: v.clone() for k, v in gpu_model.model.state_dict().items()}
    gpu = grad_cam(gpu_model, image)
    assert gpu.class_index == cpu.class_index
    assert gpu.heatmap.shape == cpu.heatmap.shape
    assert float(np.abs(gpu.heatmap - cpu.heatmap).max()) < 0.05
    assert all(torch.equal(before[k], v) for k, v in gpu_model.model.state_dict().items())  # not mutated
    assert all(p.grad is None for p in gpu_model.model.parameters())
