"""The guide's MIGraphX chapter on the REAL library: ../shared/migraphx's CPU build here (`make install` makes
it importable), ROCm's `migraphx` on a ROCm host. Every test is skipped, with the reason, when no migraphx
module loads. Most use the tiny CIFAR net (seconds); Inception v3 only where the issue asks for it (slow:
~1-2 s per image on the cpu target here). The fake (tests/support/fake_migraphx.py) is checked against this module."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dlguide_core import booth, devices, migraphx_lib
from dlguide_core.cli.main import main
from dlguide_core.inference import backend_base, backend_migraphx, choice
from dlguide_core.inference.backend_base import PRECISIONS, BackendError, BackendOptions, sample_batch
from dlguide_core.inference.backend_migraphx import MigraphxBackend, calibration_batches
from dlguide_core.inference.benchmark import agreement
from dlguide_core.inference.choice import precision_choices, precision_refusals
from dlguide_core.inference.export import export_cache_path
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import load_model
from dlguide_core.vision.presets import preprocess
from dlguide_core.vision.samples import bundled_samples
from tests.support.compiled_helpers import dlguide_home, seed_export_cache, write_cifar_checkpoint
from tests.support.fake_migraphx import FakeMigraphx, real_migraphx
from tests.support.paths import ROOT

SHARED_IMAGES = ROOT.parent / "shared" / "data" / "tiny-imagenet-10" / "val" / "images"
CPU = BackendOptions(target="cpu")
pytestmark = pytest.mark.migraphx
NO_AMD_GPU = pytest.mark.skipif(Path("/dev/kfd").exists(), reason="an AMD GPU is visible: the gpu target applies")


@pytest.fixture(scope="module")
def mgx():
    """The real migraphx module (not the fake: tests that install the fake restore sys.modules after)."""
    return real_migraphx()


def _rel(reference: torch.Tensor, logits: torch.Tensor) -> float:
    return float((reference - logits).abs().max()) / float(reference.abs().max())


# ---------------------------------------------------------------- the fake against the real module

_SIGNATURE = re.compile(r"^\w+\((.*)\) ->", re.S)


def _real_params(obj) -> set[str]:
    """Parameter names from a pybind11 docstring's first signature ("name(a: T, b: T = x) -> R")."""
    match = _SIGNATURE.match((obj.__doc__ or "").strip())
    assert match, f"no signature in {obj.__doc__!r}"
    return {part.split(":")[0].strip() for part in re.split(r",\s*(?=\w+:)", match.group(1)) if part.strip()}


FAKE_HELPERS = {"calls", "names", "fail_compile", "TARGETS"}  # the fake's own test hooks, not MIGraphX's API


def test_the_fake_offers_nothing_the_real_module_lacks(mgx):
    fake = FakeMigraphx()
    api = {name for name in dir(fake) if not name.startswith("_")} - FAKE_HELPERS
    assert api <= set(dir(mgx)), f"the fake has {sorted(api - set(dir(mgx)))}, the real migraphx does not"
    for name in sorted(api):
        fake_obj, real_obj = getattr(fake, name), getattr(mgx, name)
        if inspect.isclass(fake_obj):
            methods = {m for m in vars(fake_obj) if not m.startswith("_")}
            assert methods <= set(dir(real_obj)), f"migraphx.{name} lacks {sorted(methods - set(dir(real_obj)))}"
            for method in methods:
                fake_params = set(inspect.signature(getattr(fake_obj, method)).parameters) - {"self"}
                assert fake_params <= _real_params(getattr(real_obj, method)), f"migraphx.{name}.{method}"
        else:
            fake_params = set(inspect.signature(fake_obj).parameters)
            assert fake_params <= _real_params(real_obj), f"migraphx.{name}{inspect.signature(fake_obj)}"


# ---------------------------------------------------------------- where it is found, which target


def test_found_under_rocm_path_lib_in_a_child_process(mgx, tmp_path: Path):
    """How users on a ROCm host have it: ROCM_PATH=<folder whose lib/ holds migraphx*.so>, nothing on PYTHONPATH."""
    folder = Path(mgx.__file__).parent
    (tmp_path / "rocm").mkdir()
    (tmp_path / "rocm" / "lib").symlink_to(folder, target_is_directory=True)
    child = ("import json, os, sys\n"
             "folder = os.path.realpath(sys.argv[1])\n"
             "sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != folder]  # not importable\n"
             "from dlguide_core import migraphx_lib\n"
             "module, found = migraphx_lib.load()\n"
             "module.get_target('cpu')\n"
             "print(json.dumps({'how': found.how, 'path': found.path, 'status': migraphx_lib.status()}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MIGRAPHX_PYTHONPATH", "PYTHONPATH")}
    env.update(ROCM_PATH=str(tmp_path / "rocm"), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", child, str(folder)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["how"] == "$ROCM_PATH/lib" and found["path"].startswith(str(tmp_path / "rocm" / "lib"))
    assert found["status"][0] and "($ROCM_PATH/lib)" in found["status"][1]


@NO_AMD_GPU
def test_without_an_amd_gpu_the_cpu_target_is_offered_instead(mgx, cifar, monkeypatch):
    monkeypatch.setitem(sys.modules, "zentorch", None)  # its place among them: test_backend_zentorch.py
    auto = MigraphxBackend.availability()
    assert auto.available and auto.title == "MIGraphX (CPU)" and "cpu target on the CPU" in auto.reason
    gpu = MigraphxBackend.availability(BackendOptions(target="gpu"))
    assert not gpu.available and "no AMD GPU visible" in gpu.reason and "MIGraphX (CPU)" in gpu.reason
    ok, detail = devices.migraphx_status()
    assert ok and "the cpu target is offered instead, as MIGraphX (CPU)" in detail
    assert "migraphx" in choice.backend_choices()
    fastest = choice.fastest_available(cifar)
    assert (fastest.name, fastest.options.target) == ("onnxruntime", "cpu")  # not ranked statically
    contenders = [(c.name, c.options.target, c.options.precision) for c in choice.cpu_contenders(fastest)]
    assert contenders == [("onnxruntime", "cpu", "int8"), ("migraphx", "cpu", "fp32")]


def test_devices_json_lists_what_each_target_runs(mgx):
    targets = devices.collect(include_tensorflow=False).to_json()["migraphx_targets"]
    assert targets["cpu"] == {"precisions": list(PRECISIONS), "exhaustive_tune": True, "error": None}
    if not Path("/dev/kfd").exists():
        assert targets["gpu"]["precisions"] == [] and "no gpu target" in targets["gpu"]["error"]


def test_devices_page_shows_migraphx_and_its_targets(mgx):
    from tests.support.apptest import open_app

    at = open_app("pages/devices.py")
    assert not at.exception
    runtimes = next(df.value for df in at.dataframe if "runtime" in df.value.columns)
    assert runtimes.loc[runtimes["runtime"] == "MIGraphX", "available"].item() == "yes"
    assert any(c.value.startswith("MIGraphX targets: ") and "**cpu**: fp32, fp16, bf16, int8" in c.value
               for c in at.caption)


def test_the_cpu_and_ref_targets_run_every_precision_and_tuning(mgx):
    for target in ("cpu", "ref"):
        support = migraphx_lib.target_support(target)
        assert support.error is None and support.precisions == PRECISIONS and support.exhaustive_tune
    assert precision_choices("migraphx", "cpu") == ("fp32", "fp16", "bf16", "int8")
    assert precision_refusals("migraphx", "cpu") == {}


def test_a_target_the_library_refuses_is_one_line_in_the_backend_and_the_cli(mgx, monkeypatch, cifar_files, capsys):
    """This build has no gpu target: on a host that looks like ROCm (/dev/kfd) the refusal is the library's."""
    monkeypatch.setattr(backend_base, "amd_gpu_visible", lambda: True)
    status = MigraphxBackend.availability(BackendOptions(target="gpu"))
    assert not status.available and status.title == "MIGraphX (GPU)"
    assert status.reason.startswith("MIGraphX has no gpu target here: ") and "libmigraphx_gpu.so" in status.reason
    assert "\n" not in status.reason
    assert precision_refusals("migraphx", "gpu") == dict.fromkeys(("fp16", "bf16", "int8"), status.reason)
    code = main(["bench", "--weights", str(cifar_files[0]), "--backends", "migraphx", "--target", "gpu",
                 "--batch-sizes", "1", "--iters", "1"])
    out = capsys.readouterr().out
    assert code == 1  # no backend produced numbers
    row = next(line for line in out.splitlines() if "UNAVAILABLE" in line)
    assert row.startswith("migraphx") and "MIGraphX (GPU) is unavailable: MIGraphX has no gpu target here" in row


# ---------------------------------------------------------------- the chapter on the CIFAR net (seconds)


def test_fp32_on_cpu_matches_eager_and_the_ref_oracle(mgx, cifar):
    backend = prepare_backend("migraphx", cifar, batch_size=2, options=CPU)
    assert (backend.label, backend.provider) == ("MIGraphX (CPU)", "migraphx:cpu")
    batch = sample_batch(cifar, 5)  # (5, 3, 32, 32): chunks of 2, the last one padded
    logits = backend.run(batch)
    scores = agreement(predict_logits(cifar, batch), logits)
    assert _rel(predict_logits(cifar, batch), logits) <= 1e-3 and scores["top5_agree"] == 1.0
    # MIGraphX's reference interpreter on the same export: the oracle, never a backend
    program = mgx.parse_onnx(backend.export.path, map_input_dims={backend.export.input_name: [2, 3, 32, 32]})
    program.compile(mgx.get_target("ref"))
    reference = np.array(program.run({backend.export.input_name: batch[:2].numpy()})[0])
    assert _rel(torch.from_numpy(reference), logits[:2]) <= 1e-5


@pytest.mark.parametrize(("precision", "bound"), [("fp16", 1e-2), ("bf16", 5e-2), ("int8", 1e-1)])
def test_quantised_precisions_compile_run_and_stay_close(mgx, cifar, precision, bound):
    backend = prepare_backend("migraphx", cifar, batch_size=2, options=BackendOptions(target="cpu",
                                                                                    precision=precision))
    assert backend.provider == f"migraphx:cpu {precision}"
    assert backend.describe().mxr.endswith(f"-b2-{precision}-cpu.mxr")
    batch = sample_batch(cifar, 4)
    assert _rel(predict_logits(cifar, batch), backend.run(batch)) <= bound


def test_int8_calibrates_on_every_bundled_photo(cifar):
    photos = preprocess([load_image(p) for p in bundled_samples().values()], cifar.preset).numpy()
    chunks = calibration_batches(cifar, 1)
    assert len(chunks) == len(photos) and all(np.array_equal(c[0], p) for c, p in zip(chunks, photos))
    assert [c.shape for c in calibration_batches(cifar, 3)] == [(3, 3, 32, 32)]  # 2 photos, repeated to fill


def test_second_start_compiles_again_on_the_cpu_target(mgx, cifar):
    """Issue 26: a cpu-target program loaded from .mxr in a new process runs oneDNN's reference convolutions
    (~100x slower), so every start compiles; the .mxr is written once, for migraphx-driver users."""
    first = prepare_backend("migraphx", cifar, batch_size=2, options=CPU)
    info = first.describe()
    assert info.from_cache is False and info.compile_s > 0 and info.load_s is None
    written = Path(info.mxr).stat().st_mtime_ns
    again = prepare_backend("migraphx", cifar, batch_size=2, options=CPU)
    info = again.describe()
    assert info.from_cache is False and info.compile_s > 0 and info.load_s is None
    assert Path(info.mxr).stat().st_mtime_ns == written  # not rewritten
    batch = sample_batch(cifar, 2)
    assert torch.equal(first.run(batch), again.run(batch))


def test_prepared_on_one_thread_run_on_others(mgx, cifar):
    """Streamlit reruns a page on a new thread each time; a cpu-target program run from a thread other than
    the one that compiled or loaded it dies in oneDNN (SIGSEGV), so the backend keeps its own thread."""
    from concurrent.futures import ThreadPoolExecutor

    batch = sample_batch(cifar, 2)
    for _start in ("first", "second"):
        with ThreadPoolExecutor(1) as pool:
            backend = pool.submit(prepare_backend, "migraphx", cifar, batch_size=2, options=CPU).result()
        with ThreadPoolExecutor(2) as pool:
            outputs = list(pool.map(backend.run, [batch] * 4))
        assert all(torch.equal(o, outputs[0]) for o in outputs)


def test_exhaustive_tune_is_accepted_on_the_cpu_target(mgx, cifar):
    backend = prepare_backend("migraphx", cifar, options=BackendOptions(target="cpu", exhaustive_tune=True))
    assert backend.describe().mxr.endswith("-b1-fp32-cpu-tuned.mxr")
    batch = sample_batch(cifar, 1)
    assert _rel(predict_logits(cifar, batch), backend.run(batch)) <= 1e-3


def _driver(mgx) -> tuple[str, dict[str, str]]:
    """migraphx-driver and an environment where it finds the same libraries as the Python module."""
    candidates = [shutil.which("migraphx-driver"), ROOT.parent / "shared" / "migraphx" / "bin" / "migraphx-driver",
                  Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / "bin" / "migraphx-driver"]
    driver = next((str(c) for c in candidates if c and Path(c).is_file()), None)
    if driver is None:
        pytest.skip("migraphx-driver not found (PATH, ../shared/migraphx/bin, $ROCM_PATH/bin)")
    return driver, {**os.environ, "LD_LIBRARY_PATH": str(Path(mgx.__file__).parent)}


def _driver_compile(mgx, onnx_path: str, input_name: str, out: Path, batch: int = 1, crop: int = 32) -> Path:
    driver, env = _driver(mgx)
    cmd = [driver, "compile", "--onnx", onnx_path, "--cpu", "--input-dim", f"@{input_name}", str(batch), "3",
           str(crop), str(crop), "--binary", "--output", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    return out


def test_a_driver_compiled_mxr_is_loaded_for_matching_weights(mgx, cifar, tmp_path: Path):
    export = prepare_backend("onnxruntime", cifar).export  # the export the guide's driver compiles
    mxr = _driver_compile(mgx, export.path, export.input_name, tmp_path / "m.mxr", batch=2)
    backend = prepare_backend("migraphx", cifar, options=BackendOptions(target="cpu", mxr=str(mxr)))
    info = backend.describe()
    assert info.adopted_from == str(mxr) and info.batch_size == 2  # the file's batch size
    assert info.mxr.endswith("-b2-fp32-cpu.mxr") and Path(info.mxr).is_file()
    batch = sample_batch(cifar, 3)
    assert _rel(predict_logits(cifar, batch), backend.run(batch)) <= 1e-3
    assert info.compile_s > 0  # the cpu target runs what it compiled in this process (issue 26)


def test_a_driver_compiled_mxr_of_other_weights_is_refused(mgx, cifar, tmp_path: Path):
    other = load_model(str(write_cifar_checkpoint(tmp_path / "other.pt", seed=1)), device="cpu")
    export = prepare_backend("onnxruntime", other).export
    mxr = _driver_compile(mgx, export.path, export.input_name, tmp_path / "other.mxr")
    with pytest.raises(BackendError, match="does not match these weights"):
        prepare_backend("migraphx", cifar, options=BackendOptions(target="cpu", mxr=str(mxr)))
    assert not list((backend_migraphx.compiled_path(cifar, 1, CPU, "cpu")).parent.glob("*.mxr"))


def test_bench_gives_numeric_migraphx_cpu_rows(mgx, cifar_files, capsys):
    args = ["bench", "--weights", str(cifar_files[0]), "--backends", "torch,onnxruntime,migraphx",
            "--batch-sizes", "1,2", "--iters", "2", "--warmup", "1"]
    assert main([*args, "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["backend"] == "migraphx"]
    assert [(r["provider"], r["batch_size"]) for r in rows] == [("migraphx:cpu", 1), ("migraphx:cpu", 2)]
    assert all(r["p50_ms"] > 0 and r["top1_agree"] == 1.0 and r["max_abs_diff"] < 1e-3 for r in rows)
    assert main(args) == 0
    assert re.search(r"^migraphx +MIGraphX \(CPU\) +migraphx:cpu ", capsys.readouterr().out, re.M)


# ---------------------------------------------------------------- the booth's ranking with MIGraphX (CPU)


@NO_AMD_GPU
def test_booth_ranking_measures_migraphx_cpu_against_onnxruntime(mgx, cifar, monkeypatch):
    monkeypatch.delenv("DLGUIDE_KIOSK_BACKEND", raising=False)
    backend, why = booth.fastest_measured(cifar)
    assert why.startswith("measured p50 on one photo: ") and "MIGraphX (CPU)" in why and "ONNX Runtime" in why
    assert why.split(": ", 1)[1].startswith(backend.label)  # the winner is the fastest measured
    for fast, expected in (("migraphx", "MIGraphX (CPU) · migraphx:cpu"), ("onnxruntime", "ONNX Runtime · CPU")):
        monkeypatch.setattr(booth, "measure_p50_ms", lambda b, _batch, fast=fast: 1.0 if b.name == fast else 9.0)
        monkeypatch.setattr(booth, "measure_once_ms", lambda b, _batch, fast=fast: 2.0 if b.name == fast else 9.0)
        runner = booth.fastest_predictor(cifar)
        assert runner.backend.startswith(expected) and runner.device.startswith("CPU")
        assert runner.logits(sample_batch(cifar, 1)).shape == (1, 10)
    # a contender far slower on its first run is ranked by that run alone (no more slow runs at start-up)
    calls = []
    monkeypatch.setattr(booth, "measure_p50_ms", lambda b, _batch: calls.append(b.name) or 1.0)
    monkeypatch.setattr(booth, "measure_once_ms", lambda b, _batch: 500.0)
    backend, why = booth.fastest_measured(cifar)
    assert backend.name == "onnxruntime" and calls == ["onnxruntime"] and "MIGraphX (CPU) 500.0 ms" in why


# ---------------------------------------------------------------- Inception v3, batch 1 and 8 (slow)


@pytest.fixture(scope="module")
def inception(prepared_booth, imagenet_state_file):
    """Inception v3 (the stand-in ImageNet weights) and its ONNX export, as the booth exported it for this run."""
    old = os.environ.get("TORCH_HOME")
    os.environ["TORCH_HOME"] = str(imagenet_state_file.parents[2])
    try:
        loaded = load_model("imagenet", device="cpu")
    finally:
        os.environ.pop("TORCH_HOME") if old is None else os.environ.__setitem__("TORCH_HOME", old)
    with dlguide_home(prepared_booth):
        export = export_cache_path(loaded)
    assert export.is_file(), export
    return loaded, export


def _images(count: int) -> list:
    """The bundled photos, then ../shared/data's tiny-imagenet validation images (when present)."""
    paths = list(bundled_samples().values()) + sorted(SHARED_IMAGES.glob("*.JPEG"))[:max(0, count - 2)]
    return [load_image(p) for p in (paths * count)[:count]]


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1])  # batch 8 (41 s here) is bench_backends.py's; CI's budget is 20 min
def test_inception_v3_on_the_cpu_target_agrees_with_pytorch(mgx, inception, batch_size, booth_home):
    """The program MIGraphX compiled for the booth in this run (prepared_booth: parse_onnx, compile, save; batch 1)
    is loaded from the cache and checked against eager PyTorch: compiling Inception again would cost a minute of
    CPU (compiling and saving are checked on the CIFAR net above)."""
    if batch_size == 8 and not SHARED_IMAGES.is_dir():
        pytest.skip(f"{SHARED_IMAGES} not here: batch 8 of distinct images needs ../shared/data")
    loaded, _ = inception  # its export and compiled program are in booth_home's caches
    backend = prepare_backend("migraphx", loaded, batch_size=batch_size, options=CPU)  # cached, else compiled
    assert backend.describe().mxr.endswith(f"-b{batch_size}-fp32-cpu.mxr")
    batch = preprocess(_images(batch_size if batch_size > 1 else 3), loaded.preset)  # (N, 3, 299, 299)
    reference = predict_logits(loaded, batch)
    logits = backend.run(batch)
    assert _rel(reference, logits) <= 1e-3
    assert torch.equal(reference.topk(5).indices.sort().values, logits.topk(5).indices.sort().values)


@pytest.mark.slow
# int8 (another 86 s of one CI worker's compile) goes through the same all-zero check as fp16 and is refused the same
# way: bench/bench_backends.py (--migraphx fp32,fp16,bf16,int8) compiles it for Inception v3 and reports the refusal.
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_inception_v3_quantised_on_the_cpu_target_answers_right_or_is_refused(mgx, inception, precision,
                                                                              isolated_home):
    """bf16 runs (rel. diff ~0.12, same top-1). fp16 (and int8: see above) compile and run on this build's cpu target
    but return all-zero logits for Inception v3: the backend refuses them in one line and caches nothing."""
    loaded, onnx_path = inception
    seed_export_cache(loaded, onnx_path)
    options = BackendOptions(target="cpu", precision=precision)
    if precision == "bf16":
        backend = prepare_backend("migraphx", loaded, options=options)
        batch = sample_batch(loaded, 2)
        reference, logits = predict_logits(loaded, batch), backend.run(batch)
        assert _rel(reference, logits) <= 0.2 and torch.equal(reference.argmax(1), logits.argmax(1))
        return
    with pytest.raises(BackendError) as err:
        prepare_backend("migraphx", loaded, options=options)
    assert str(err.value) == (f"MIGraphX {precision} on its cpu target gives wrong answers for this model "
                              "(every logit is 0); use fp32 or another precision")
    assert not backend_migraphx.compiled_path(loaded, 1, options, "cpu").exists()


def test_migraphx_speaks_only_of_errors_unless_asked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(migraphx_lib.LOG_LEVEL_ENV, raising=False)
    migraphx_lib.quiet_logs()
    assert os.environ[migraphx_lib.LOG_LEVEL_ENV] == "1"  # errors only
    monkeypatch.setenv(migraphx_lib.LOG_LEVEL_ENV, "3")
    migraphx_lib.quiet_logs()
    assert os.environ[migraphx_lib.LOG_LEVEL_ENV] == "3"  # the user's own level is kept


def test_compiling_the_guides_model_prints_no_warning_lines(mgx, tmp_path: Path):
    """Issue 43's walk: every compile of Inception v3 printed MIGraphX's "[WARN] ... Instruction needs
    normalization, performance may be affected" (its C++ logger, at INFO by default), which a user cannot act on."""
    env = {**os.environ, "DLGUIDE_HOME": str(tmp_path / "home")}
    env.pop(migraphx_lib.LOG_LEVEL_ENV, None)
    done = subprocess.run([sys.executable, "-m", "dlguide_core", "bench", "--weights", "none", "--backends",
                           "migraphx", "--target", "cpu", "--batch-sizes", "1", "--iters", "1", "--warmup", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^migraphx\s+MIGraphX \(CPU\)", done.stdout, re.MULTILINE), done.stdout  # it compiled and ran
    assert "[WARN]" not in done.stdout + done.stderr, done.stderr[-3000:]
