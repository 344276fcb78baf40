"""AppTest of the Compiled inference page (and the Backend selector it adds to Classify)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dlguide_core import migraphx_lib
from dlguide_core.inference import benchmark
from dlguide_core.vision.models import load_model
from tests.support.apptest import open_app
from tests.support.compiled_helpers import finish_bench, seed_export_cache, write_cifar_checkpoint


@pytest.fixture
def job_checkpoint(cifar_files, isolated_home: Path, tmp_path: Path, monkeypatch) -> str:
    """A job's checkpoint under DLGUIDE_HOME/jobs (so the app lists it), its ONNX export already cached."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no_torch_home"))  # ImageNet weights absent, as here
    path = write_cifar_checkpoint(isolated_home / "jobs" / "job1" / "model.pt")
    seed_export_cache(load_model(str(path), device="cpu"), cifar_files[1])
    return str(path)


def _table(at: AppTest, column: str):
    """The first table with `column` (AppTest does not expose st.dataframe keys)."""
    return next(df.value for df in at.dataframe if column in df.value.columns)


def _page(page: str = "pages/compiled.py") -> AppTest:
    return open_app(page)


def test_missing_imagenet_weights_ask_before_downloading(job_checkpoint):
    at = _page()
    assert not at.exception
    assert any("not cached" in w.value for w in at.warning)
    assert at.button(key="compiled_download_weights")
    assert not at.dataframe  # stopped before any backend work
    at.button(key="compiled_download_weights").click().run()  # the helper shared with Classify
    assert any("could not be downloaded" in e.value for e in at.error) and not at.exception
    assert not at.dataframe


def test_prepare_classify_and_benchmark_then_revisit(job_checkpoint, monkeypatch):
    calls = []
    real = benchmark.run_benchmark
    monkeypatch.setattr(benchmark, "run_benchmark", lambda *a, **k: calls.append(1) or real(*a, **k))
    at = _page()
    at.selectbox(key="compiled_weights").set_value(job_checkpoint).run()
    status = _table(at, "why")
    mgx = "MIGraphX (GPU)" if Path("/dev/kfd").exists() else "MIGraphX (CPU)"
    assert list(status["backend"]) == ["PyTorch (eager)", "ONNX Runtime", mgx, "zentorch"]  # zentorch: a state
    why = status.loc[status["backend"] == mgx, "why"].item()
    assert ("target on" in why) if migraphx_lib.status()[0] else ("module migraphx not installed" in why)

    at.selectbox(key="compiled_backend").set_value("onnxruntime").run()
    at.button(key="compiled_prepare").click().run()
    assert not at.exception and not at.error
    assert "ready on **CPUExecutionProvider**" in at.success[0].value
    assert "ONNX export reused from cache" in at.success[0].value  # the fixture cached it: no stale export time
    [onnx] = [b for b in at.get("download_button") if b.proto.id.endswith("compiled_onnx_download")]
    assert onnx.proto.label.startswith("Download the ONNX model")

    at.selectbox(key="compiled_sample").set_value("chelsea").run()
    top = _table(at, "probability")
    assert len(top) == 5 and set(top["label"]) <= {"plane", "car", "bird", "cat", "deer", "dog", "frog", "horse",
                                                   "ship", "truck"}
    assert any(c.value.startswith("ONNX Runtime · fp32 · ") for c in at.caption)  # what produced it

    at.multiselect(key="compiled_bench_backends").set_value(["torch", "onnxruntime"])
    at.multiselect(key="compiled_bench_sizes").set_value([1])
    at.slider(key="compiled_bench_iters").set_value(1)
    at.button(key="compiled_bench_run").click().run()
    finish_bench(at)
    table = _table(at, "p50_ms")
    assert list(table["backend"]) == ["torch", "onnxruntime"] and (table["p50_ms"] > 0).all()
    assert table["speedup"].iloc[0] == 1.0 and table["speedup"].iloc[1] > 0  # vs the torch row
    assert len(at.get("plotly_chart")) >= 2 and len(calls) == 1
    assert any(c.value.startswith("Single image (batch 1, p50): ") for c in at.caption)
    assert any(m.value.startswith("Fastest measured here just now: **") for m in at.markdown)

    at.switch_page("pages/devices.py").run()
    at.switch_page("pages/compiled.py").run()  # revisit: results shown again, nothing recomputed
    assert len(calls) == 1
    assert _table(at, "p50_ms")["backend"].tolist() == ["torch", "onnxruntime"]


def test_a_new_backend_ranked_fastest_is_named_by_its_declared_label(job_checkpoint, monkeypatch):
    """Issue 23: the page looked the fastest backend's label up in a dict of its own (ui/backends.py's
    BACKEND_LABELS), a KeyError once a backend it lacked ranked fastest; the label is now the declared one."""
    from dlguide_core.inference import choice, specs
    from dlguide_core.inference.backend_base import BackendOptions

    monkeypatch.setitem(specs.SPEC, "warp", specs.BackendSpec("warp", "Warp Drive"))  # declared, ranked first
    monkeypatch.setattr(choice, "fastest_available",
                        lambda _loaded=None: choice.BackendChoice("warp", BackendOptions(target="cpu"), "measured"))
    at = _page()
    at.selectbox(key="compiled_weights").set_value(job_checkpoint).run()
    assert not at.exception
    assert any(c.value == "Fastest available here: **Warp Drive** (measured)." for c in at.caption)


def test_classify_page_backend_selector_routes_through_onnxruntime(job_checkpoint):
    at = _page("pages/classify.py")
    at.selectbox(key="classify_weights").set_value(job_checkpoint).run()
    extra = ["MIGraphX (CPU)"] if migraphx_lib.status()[0] and not Path("/dev/kfd").exists() else []
    extra += ["zentorch"] if importlib.util.find_spec("zentorch") else []  # optional (requirements-dev.txt)
    assert at.selectbox(key="classify_backend").options == ["PyTorch (eager)", "ONNX Runtime", *extra]
    assert at.selectbox(key="classify_backend").value == "torch"  # PyTorch stays the default
    at.selectbox(key="classify_sample").set_value("chelsea").run()
    eager = _table(at, "probability")["index"].tolist()
    at.selectbox(key="classify_backend").set_value("onnxruntime").run()
    assert not at.exception and not at.error
    assert _table(at, "probability")["index"].tolist() == eager
    # asking for speed: the int8 path (static QDQ on the CPU provider) is offered and runs
    precision = at.selectbox(key="classify_precision")
    assert [o.split(" ")[0] for o in precision.options] == ["fp32", "int8"]
    precision.set_value("int8").run()
    assert not at.exception and not at.error
    assert len(_table(at, "probability")) == 5
    assert any(c.value.startswith("ONNX Runtime · int8 · ") for c in at.caption)  # the result says what made it


@pytest.mark.migraphx
def test_compiled_page_compiles_and_benchmarks_with_the_real_migraphx(job_checkpoint):
    """The real library (skipped when it does not load): compile with progress, then the bench table."""
    ok, reason = migraphx_lib.status()
    if not ok:
        pytest.skip(f"real MIGraphX not loadable ({reason}); `make install` makes ../shared/migraphx importable")
    at = _page()
    at.selectbox(key="compiled_weights").set_value(job_checkpoint).run()
    at.selectbox(key="compiled_backend").set_value("migraphx").run()
    at.selectbox(key="compiled_target").set_value("cpu").run()
    assert list(at.selectbox(key="compiled_precision").options) == ["fp32", "fp16", "bf16", "int8"]
    assert at.selectbox(key="compiled_backend").format_func("migraphx") == "MIGraphX (CPU)"
    at.button(key="compiled_prepare").click().run()
    assert not at.exception and not at.error
    ready = at.success[0].value
    assert ready.startswith("MIGraphX (CPU) ready on **migraphx:cpu**") and "compiled in" in ready
    assert any(c.value.startswith("Compiled program: `") and "-b1-fp32-cpu.mxr" in c.value for c in at.caption)

    at.selectbox(key="compiled_sample").set_value("chelsea").run()
    assert len(_table(at, "probability")) == 5

    at.multiselect(key="compiled_bench_backends").set_value(["torch", "migraphx"])
    at.multiselect(key="compiled_bench_sizes").set_value([1])
    at.slider(key="compiled_bench_iters").set_value(1)
    at.button(key="compiled_bench_run").click().run()
    finish_bench(at)
    assert not at.exception
    table = _table(at, "p50_ms")
    assert list(table["runtime"]) == ["PyTorch (eager)", "MIGraphX (CPU)"] and (table["p50_ms"] > 0).all()
    assert list(table["provider"])[1] == "migraphx:cpu" and table["top1_agree"].iloc[1] == 1.0


def test_benchmark_defaults_are_quick_runs_off_the_script_thread_and_says_when_disturbed(job_checkpoint, monkeypatch):
    """Issue 31: the default benchmark included zentorch (9 minutes), showed nothing until it ended, could not be
    stopped, and its figures did not say that other work ran meanwhile."""
    import threading

    from dlguide_core.inference import activity
    from dlguide_core.inference.activity import Activity

    at = _page()
    at.selectbox(key="compiled_weights").set_value(job_checkpoint).run()
    picker = at.multiselect(key="compiled_bench_backends")
    assert "zentorch" not in picker.value and {"torch", "onnxruntime"} <= set(picker.value)
    assert "zentorch: torch.compile with ZenDNN compiles for minutes" in picker.help

    gate, real, calls = threading.Event(), benchmark.measure, []  # the run waits after its first row:

    def gated(*args, **kwargs):  # the page must show that row meanwhile, and Stop must end the run
        calls.append(1)
        if len(calls) > 1:
            gate.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "measure", gated)
    busy = iter([Activity(0, frozenset({"job7"})), Activity(2, frozenset({"job7"}))] + [Activity(2, frozenset())] * 9)
    monkeypatch.setattr(activity, "snapshot", lambda jobs=None: next(busy))
    picker.set_value(["torch", "onnxruntime"])
    at.multiselect(key="compiled_bench_sizes").set_value([1, 8])
    at.slider(key="compiled_bench_iters").set_value(1)
    at.button(key="compiled_bench_run").click().run()
    assert not at.exception
    job = at.session_state["compiled_bench_job"]
    for _ in range(600):  # the first row, while the second measurement waits at the gate
        if job.progress().rows:
            break
        threading.Event().wait(0.1)
    at.run()
    table = _table(at, "p50_ms")
    assert list(table["backend"]) == ["torch"] and table["disturbed"].iloc[0] == "1 running job, 2 other forwards"
    assert any("measured while other work ran" in w.value for w in at.warning)
    assert at.button(key="compiled_bench_run").disabled  # one run at a time
    job.stop()
    gate.set()
    finish_bench(at)
    assert any(i.value.startswith("Stopped: ") for i in at.info)
    assert len(_table(at, "p50_ms")) < 4  # it did not go on to the other rows
    assert not at.button(key="compiled_bench_run").disabled


def test_compiled_page_says_in_one_line_why_precisions_are_not_offered(job_checkpoint):
    at = _page()
    at.selectbox(key="compiled_weights").set_value(job_checkpoint).run()
    at.selectbox(key="compiled_backend").set_value("torch").run()
    assert any(c.value == "Not offered: fp16, bf16, int8: PyTorch eager runs fp32 only; fp16/bf16/int8 need MIGraphX"
               for c in at.caption)


@pytest.mark.migraphx
@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="an AMD GPU is visible: the gpu target applies")
def test_compiled_page_refuses_the_gpu_target_here_in_one_line(job_checkpoint):
    if not migraphx_lib.status()[0]:
        pytest.skip(f"real MIGraphX not loadable ({migraphx_lib.status()[1]})")
    at = _page()
    at.selectbox(key="compiled_weights").set_value(job_checkpoint).run()
    at.selectbox(key="compiled_backend").set_value("migraphx").run()
    at.selectbox(key="compiled_target").set_value("gpu").run()
    assert list(at.selectbox(key="compiled_precision").options) == ["fp32"]
    assert any(c.value.startswith("Not offered: fp16, bf16, int8: no AMD GPU visible") for c in at.caption)
    at.button(key="compiled_prepare").click().run()
    assert not at.exception
    assert at.error[0].value.startswith("MIGraphX (GPU) is unavailable: no AMD GPU visible")
    assert "\n" not in at.error[0].value
