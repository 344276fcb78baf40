"""Backends: availability and reasons, ONNX Runtime, eager/torch.compile, and the MIGraphX adapter's
`gpu` target against a FAKE migraphx module (tests/support/fake_migraphx.py): the only target the real build
here cannot reach. The real library (cpu and ref targets) is tested in tests/inference/test_backend_migraphx.py."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

from dlguide_core import migraphx_lib, onnxruntime_lib
from dlguide_core.inference import backend_base, backend_onnxruntime, registry
from dlguide_core.inference.backend_base import (
    BackendError,
    BackendOptions,
    BackendUnavailable,
    backend_model,
    sample_batch,
)
from dlguide_core.inference.backend_migraphx import compiled_path
from dlguide_core.inference.backend_onnxruntime import ort_providers
from dlguide_core.inference.benchmark import agreement
from dlguide_core.inference.choice import backend_choices, fastest_available, precision_choices, prepare_fastest
from dlguide_core.inference.registry import backend_status, prepare_backend
from dlguide_core.vision.classify import classify_sources, predict_logits
from dlguide_core.vision.samples import bundled_samples
from tests.support.fake_migraphx import FakeMigraphx

onnxruntime = onnxruntime_lib.load()


@pytest.fixture
def fake_migraphx(monkeypatch: pytest.MonkeyPatch) -> FakeMigraphx:
    """The fake on a pretend ROCm host (an AMD GPU visible), its gpu target already probed."""
    fake = FakeMigraphx()
    monkeypatch.setitem(sys.modules, "migraphx", fake)
    monkeypatch.setattr(backend_base, "amd_gpu_visible", lambda: True)
    assert migraphx_lib.target_support("gpu").precisions == ("fp32", "fp16", "bf16", "int8")
    fake.calls.clear()
    return fake


GPU = BackendOptions(target="gpu")
DESCRIBE_KEYS = ("backend", "title", "provider", "precision", "batch_size", "setup_s", "onnx", "export_s",
                 "export_made_s")  # keys are only ever added (issue 31: how long this server took to export)


def _status(name: str, options: BackendOptions | None = None):
    return {s.name: s for s in backend_status(options)}[name]


# ------------------------------------------------------------------ availability


def test_missing_modules_are_states_with_reasons(monkeypatch):
    monkeypatch.setitem(sys.modules, "migraphx", None)  # import fails, as on a machine without ROCm
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    status = {s.name: s for s in backend_status()}
    assert status["torch"].available
    assert not status["migraphx"].available and "migraphx not installed" in status["migraphx"].reason
    assert not status["onnxruntime"].available and "onnxruntime not installed" in status["onnxruntime"].reason


def test_prepare_refuses_an_unavailable_backend_in_one_line(monkeypatch, cifar):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(BackendUnavailable, match="ONNX Runtime is unavailable: module onnxruntime not installed"):
        prepare_backend("onnxruntime", cifar)


def test_onnxruntime_gpu_target_without_gpu_provider_says_so(monkeypatch):
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    status = _status("onnxruntime", BackendOptions(target="gpu"))
    assert not status.available and "no GPU execution provider" in status.reason


def test_onnxruntime_providers_follow_the_preference_order(monkeypatch):
    present = ["CPUExecutionProvider", "CUDAExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: present)
    assert ort_providers(BackendOptions()) == ["MIGraphXExecutionProvider", "ROCMExecutionProvider",
                                               "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert ort_providers(BackendOptions(target="cpu")) == ["CPUExecutionProvider"]


def test_migraphx_gpu_target_without_gpu_says_so(fake_migraphx, monkeypatch):
    monkeypatch.setattr(backend_base, "amd_gpu_visible", lambda: False)
    auto = _status("migraphx")
    assert auto.available and auto.title == "MIGraphX (CPU)"  # auto falls back to the cpu target
    status = _status("migraphx", BackendOptions(target="gpu"))
    assert not status.available and "no AMD GPU visible" in status.reason and "MIGraphX (CPU)" in status.reason


def test_backend_choices_put_torch_first_then_what_runs_here(monkeypatch):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    monkeypatch.setitem(sys.modules, "zentorch", None)  # optional too: tests/inference/test_backend_zentorch.py
    assert backend_choices() == ["torch", "onnxruntime"]
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert backend_choices() == ["torch"]


def test_backend_choices_include_migraphx_where_it_imports(fake_migraphx, monkeypatch):
    monkeypatch.setitem(sys.modules, "zentorch", None)
    assert backend_choices() == ["torch", "onnxruntime", "migraphx"]


def test_precision_choices_follow_what_can_run(fake_migraphx, monkeypatch):
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    assert precision_choices("torch") == ("fp32",)
    assert precision_choices("onnxruntime") == ("fp32", "int8")  # int8: static QDQ on the CPU; fp16: MIGraphX only
    assert precision_choices("migraphx", "gpu") == ("fp32", "fp16", "bf16", "int8")
    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["MIGraphXExecutionProvider", "CPUExecutionProvider"])
    assert precision_choices("onnxruntime") == ("fp32", "fp16", "int8")
    assert precision_choices("onnxruntime", "cpu") == ("fp32", "int8")


def test_torch_refuses_other_precisions_as_a_state(cifar):
    status = _status("torch", BackendOptions(precision="fp16"))
    assert not status.available and "fp32 only" in status.reason
    with pytest.raises(BackendUnavailable, match="fp32 only"):
        prepare_backend("torch", cifar, options=BackendOptions(precision="int8"))


def test_unknown_backend_and_bad_options_name_the_choices():
    with pytest.raises(ValueError, match="torch, onnxruntime, migraphx"):
        registry.backend_class("tensorrt")
    with pytest.raises(ValueError, match="fp32, fp16, bf16, int8"):
        BackendOptions(precision="fp8")


# ------------------------------------------------------------------ fastest_available


def test_fastest_available_on_this_cpu_is_onnxruntime(monkeypatch, cifar):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    choice = fastest_available(cifar)
    assert (choice.name, choice.options.target) == ("onnxruntime", "cpu")


def test_fastest_available_prefers_migraphx_on_an_amd_gpu(fake_migraphx, monkeypatch, cifar):
    choice = fastest_available(cifar)
    assert (choice.name, choice.options.target) == ("migraphx", "gpu")


def test_fastest_available_without_runtimes_is_eager_torch(monkeypatch, cifar):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert fastest_available(cifar).name == "torch"


def test_prepare_fastest_falls_back_to_eager_when_the_choice_fails(fake_migraphx, monkeypatch, cifar):
    fake_migraphx.fail_compile = True
    backend = prepare_fastest(cifar)
    assert "compile" in fake_migraphx.names()  # it did try MIGraphX first
    assert backend.name == "torch"


# ------------------------------------------------------------------ ONNX Runtime and torch


def test_onnxruntime_backend_matches_eager_and_reports_its_provider(cifar):
    backend = prepare_backend("onnxruntime", cifar, options=BackendOptions(intra_op_threads=1))
    batch = sample_batch(cifar, 5)  # (5, 3, 32, 32)
    logits = backend.run(batch)
    assert logits.shape == (5, 10) and logits.dtype == torch.float32
    scores = agreement(predict_logits(cifar, batch), logits)
    assert scores["max_abs_diff"] <= 1e-4 and scores["top1_agree"] == scores["top5_agree"] == 1.0
    info = backend.describe()
    assert info.provider == "CPUExecutionProvider" == backend.provider
    assert info.setup_s >= 0 and Path(info.onnx).is_file()
    # issue 23: a frozen record, not dict[str, Any]; as JSON, the keys of the dict it replaced
    assert list(info.to_json()) == list(DESCRIBE_KEYS) and info.to_json()["title"] == "ONNX Runtime"
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.title = "something else"  # type: ignore[misc]


def test_onnxruntime_fp16_needs_the_migraphx_provider(cifar, monkeypatch):
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    status = _status("onnxruntime", BackendOptions(precision="fp16"))
    assert not status.available and "needs the MIGraphX execution provider" in status.reason
    with pytest.raises(BackendUnavailable, match="needs the MIGraphX execution provider"):
        prepare_backend("onnxruntime", cifar, options=BackendOptions(precision="fp16"))


def test_onnxruntime_int8_on_the_cpu_runs_a_calibrated_qdq_model(cifar, monkeypatch):
    import onnx

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    backend = prepare_backend("onnxruntime", cifar, options=BackendOptions(precision="int8"))
    assert backend.provider == "CPUExecutionProvider"
    quantized = Path(backend.export.path).with_name(Path(backend.export.path).stem + ".int8.onnx")
    ops = {node.op_type for node in onnx.load(str(quantized)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    # Photos, the kind of input it was calibrated for (the calibration photos, and the same mirrored: pixels it did
    # not see). Gaussian noise, as this test used, lies outside every calibrated range: its error varied by draw.
    photos = backend_base.sample_batch(cifar, 2)
    batch = torch.cat([photos, photos.flip(-1)])
    with torch.inference_mode():
        eager = cifar.model(batch)
    logits = backend.run(batch)
    assert logits.shape == eager.shape
    assert (logits - eager).abs().max().item() < 0.25 * eager.abs().max().item() + 1e-3  # int8, not bit-exact
    stamp = quantized.stat().st_mtime_ns
    prepare_backend("onnxruntime", cifar, options=BackendOptions(precision="int8"))
    assert quantized.stat().st_mtime_ns == stamp  # cached by the weights' fingerprint


def test_graph_optimisation_and_threads_reach_the_session_options():
    options = BackendOptions(intra_op_threads=3, inter_op_threads=1, graph_optimization="basic")
    so = backend_onnxruntime.session_options(options)
    assert so.intra_op_num_threads == 3 and so.inter_op_num_threads == 1
    assert so.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    # issue 26: workers that spin-wait took 2.1x longer per image on a shared CPU (docs/BENCHMARKS.md)
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_classify_through_a_backend_gives_the_eager_top5(cifar):
    sources = [(name, path) for name, path in bundled_samples().items()]
    backend = prepare_backend("onnxruntime", cifar)
    via_ort = classify_sources(backend_model(cifar, backend), sources, k=5)
    eager = classify_sources(cifar, sources, k=5)
    assert [[p.index for p in r.top] for r in via_ort] == [[p.index for p in r.top] for r in eager]
    assert backend_model(cifar, prepare_backend("torch", cifar)) is cifar  # eager needs no wrapper


def test_agreement_counts_rows():
    reference = torch.tensor([[0.0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]])
    other = reference.clone()
    other[1] = torch.tensor([0.0, 4, 3, 2, 1, 5])  # row 1: new arg-max, and index 5 enters its top-5
    scores = agreement(reference, other)
    assert scores["top1_agree"] == 0.5 and scores["top5_agree"] == 0.5 and scores["max_abs_diff"] == 5.0


# ------------------------------------------------------------------ MIGraphX adapter, gpu target (fake module)


def test_migraphx_compiles_with_the_batch_mapped_and_caches_an_mxr(fake_migraphx, cifar):
    backend = prepare_backend("migraphx", cifar, batch_size=4, options=GPU)
    export = backend.export
    parse = dict(fake_migraphx.calls)["parse_onnx"]
    assert parse == {"filename": export.path, "map_input_dims": {export.input_name: [4, 3, 32, 32]}}
    assert ("get_target", "gpu") in fake_migraphx.calls
    compile_args = dict(fake_migraphx.calls)["compile"]
    assert compile_args["target"] == "gpu" and compile_args["offload_copy"] is True
    assert not compile_args["exhaustive_tune"]
    mxr = compiled_path(cifar, 4, GPU, "gpu")
    assert mxr.is_file() and mxr.name == f"cifar_net-{cifar.fingerprint}-b4-fp32-gpu.mxr"
    # a fresh program answers the sample photos like PyTorch before it is saved
    assert fake_migraphx.names() == ["parse_onnx", "get_target", "compile", "run", "save"]


def test_migraphx_run_pads_and_splits_to_the_compiled_batch(fake_migraphx, cifar):
    backend = prepare_backend("migraphx", cifar, batch_size=4, options=GPU)
    batch = sample_batch(cifar, 6)  # (6, 3, 32, 32): one full chunk of 4, one padded chunk of 2
    fake_migraphx.calls.clear()
    logits = backend.run(batch)
    runs = [args for name, args in fake_migraphx.calls if name == "run"]
    assert runs == [{backend.export.input_name: (4, 3, 32, 32)}] * 2
    assert logits.shape == (6, 10)
    assert agreement(predict_logits(cifar, batch), logits)["max_abs_diff"] <= 1e-4


def test_migraphx_second_start_loads_the_mxr_instead_of_compiling(fake_migraphx, cifar):
    options = GPU
    prepare_backend("migraphx", cifar, batch_size=2, options=options)
    fake_migraphx.calls.clear()
    again = prepare_backend("migraphx", cifar, batch_size=2, options=options)
    assert fake_migraphx.names() == ["load"]
    info = again.describe()
    assert info.from_cache is True and info.saved_compile_s is not None and info.load_s is not None
    assert list(info.to_json()) == [*DESCRIBE_KEYS, "target", "exhaustive_tune", "mxr", "from_cache", "adopted_from",
                                    "compile_s", "saved_compile_s", "load_s", "miopen_find_enforce"]
    assert again.run(sample_batch(cifar, 2)).shape == (2, 10)
    prepare_backend("migraphx", cifar, batch_size=3, options=options)  # another batch: another program
    assert "compile" in fake_migraphx.names()


def test_migraphx_cpu_target_compiles_every_start_and_never_loads_the_mxr(fake_migraphx, cifar):
    """Issue 26: on the cpu target a program loaded from .mxr in a new process runs oneDNN's reference
    convolutions (~100x slower); every start compiles instead, and the file is not rewritten."""
    cpu = BackendOptions(target="cpu")
    prepare_backend("migraphx", cifar, batch_size=2, options=cpu)
    assert compiled_path(cifar, 2, cpu, "cpu").is_file()
    fake_migraphx.calls.clear()
    again = prepare_backend("migraphx", cifar, batch_size=2, options=cpu)
    assert fake_migraphx.names() == ["parse_onnx", "get_target", "compile", "run"]  # no load, no save
    assert again.describe().from_cache is False and again.describe().compile_s >= 0


def test_migraphx_fp16_quantises_before_compiling(fake_migraphx, cifar):
    backend = prepare_backend("migraphx", cifar, options=BackendOptions(target="gpu", precision="fp16"))
    names = fake_migraphx.names()
    assert names.index("quantize_fp16") < names.index("compile")
    assert backend.describe().mxr.endswith("-b1-fp16-gpu.mxr")
    assert backend.provider == "migraphx:gpu fp16"


def test_migraphx_int8_calibrates_on_preprocessed_photos(fake_migraphx, cifar):
    prepare_backend("migraphx", cifar, batch_size=2, options=BackendOptions(target="gpu", precision="int8"))
    quant = dict(fake_migraphx.calls)["quantize_int8"]
    input_name = dict(fake_migraphx.calls)["parse_onnx"]["map_input_dims"]
    assert quant["target"] == "gpu" and quant["calibration"] == [{name: (2, 3, 32, 32) for name in input_name}]


def test_migraphx_exhaustive_tune_reaches_compile_and_the_cache_key(fake_migraphx, cifar):
    backend = prepare_backend("migraphx", cifar, options=BackendOptions(target="gpu", exhaustive_tune=True))
    assert dict(fake_migraphx.calls)["compile"]["exhaustive_tune"] is True
    assert backend.describe().mxr.endswith("-fp32-gpu-tuned.mxr")


def test_migraphx_failure_is_one_line_and_leaves_no_mxr(fake_migraphx, cifar):
    fake_migraphx.fail_compile = True
    with pytest.raises(BackendError, match="MIGraphX failed: fake migraphx: compile failed"):
        prepare_backend("migraphx", cifar, options=GPU)
    assert not compiled_path(cifar, 1, GPU, "gpu").exists()
