"""zentorch (AMD's ZenDNN plugin for torch.compile) as a backend: a missing package or a precision it does not run
is a state with a reason, a tiny model compiled through it answers like eager, and the booth picks it only where it
agrees with eager and measures fastest. The compiling tests need zentorch (requirements-dev.txt installs it)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from dlguide_core import booth, migraphx_lib
from dlguide_core.inference import backend_zentorch, choice, registry, specs
from dlguide_core.inference.backend_base import BackendOptions, BackendUnavailable, sample_batch
from dlguide_core.vision.classify import predict_logits
from tests.support.paths import ROOT

needs_zentorch = pytest.mark.skipif(importlib.util.find_spec(specs.ZENTORCH) is None,
                                    reason="zentorch not installed (pip install -c constraints.txt zentorch)")


def test_a_missing_zentorch_is_a_state_with_a_reason(monkeypatch: pytest.MonkeyPatch, cifar) -> None:
    monkeypatch.setitem(sys.modules, "zentorch", None)  # import fails, as without the package
    status = {s.name: s for s in registry.backend_status()}["zentorch"]
    assert not status.available and "module zentorch not installed" in status.reason
    assert "zentorch" not in choice.backend_choices()
    with pytest.raises(BackendUnavailable, match="zentorch is unavailable: module zentorch not installed"):
        registry.prepare_backend("zentorch", cifar)


@needs_zentorch
def test_zentorch_runs_fp32_on_the_cpu_only() -> None:
    cls = registry.backend_class("zentorch")
    assert cls.availability().available and "zentorch" in choice.backend_choices()
    assert choice.precision_choices("zentorch") == ("fp32",)
    gpu = cls.availability(BackendOptions(target="gpu"))
    assert not gpu.available and "CPU only" in gpu.reason


@needs_zentorch
@pytest.mark.slow
def test_a_tiny_model_compiled_through_zentorch_answers_like_eager(cifar) -> None:
    backend = registry.prepare_backend("zentorch", cifar, batch_size=2)
    batch = sample_batch(cifar, 2)
    assert torch.allclose(backend.run(batch), predict_logits(cifar, batch), atol=1e-4)
    assert backend.provider == "cpu (torch.compile zentorch, own process)" and backend.describe().title == "zentorch"
    # compiled in a process of its own (issue 18): neither the trace nor ZenDNN enters this one
    assert backend._compiled is not None and backend._compiled.pid != os.getpid()


@needs_zentorch
def test_zentorch_is_a_checked_cpu_contender_where_the_cpu_has_avx512(monkeypatch: pytest.MonkeyPatch, cifar) -> None:
    monkeypatch.setitem(sys.modules, "migraphx", None)
    best = choice.fastest_available(cifar)
    assert best.name == "onnxruntime"  # never the static pick: it competes by measurement only
    monkeypatch.setattr(backend_zentorch, "cpu_capability", lambda: "AVX512")
    monkeypatch.delenv("DLGUIDE_KIOSK_ZENTORCH", raising=False)  # not asked: a booth opens in seconds, no compile
    assert [c.name for c in choice.cpu_contenders(best)] == ["onnxruntime"]
    monkeypatch.setenv("DLGUIDE_KIOSK_ZENTORCH", "1")
    [zentorch] = [c for c in choice.cpu_contenders(best) if c.name == "zentorch"]
    assert zentorch.checked and (zentorch.options.target, zentorch.options.precision) == ("cpu", "fp32")
    monkeypatch.setattr(backend_zentorch, "cpu_capability", lambda: "AVX2")
    assert [c.name for c in choice.cpu_contenders(best)] == ["onnxruntime"]  # ORT int8 alone
    assert "zentorch fp32 (with DLGUIDE_KIOSK_ZENTORCH=1, where the CPU has AVX-512)" in booth.choice_rule()


@needs_zentorch
@pytest.mark.slow
def test_the_booth_picks_zentorch_only_where_it_agrees_and_measures_fastest(monkeypatch: pytest.MonkeyPatch,
                                                                           cifar) -> None:
    monkeypatch.delenv("DLGUIDE_KIOSK_BACKEND", raising=False)
    monkeypatch.setitem(sys.modules, "migraphx", None)
    monkeypatch.setattr(backend_zentorch, "cpu_capability", lambda: "AVX512")
    monkeypatch.setenv("DLGUIDE_KIOSK_ZENTORCH", "1")
    prepared = {}
    real_prepare = registry.prepare_backend

    def prepare_once(name, loaded, **kwargs):  # one compile for both rankings below
        key = (name, kwargs.get("options"))
        prepared[key] = prepared.get(key) or real_prepare(name, loaded, **kwargs)
        return prepared[key]

    monkeypatch.setattr(registry, "prepare_backend", prepare_once)
    fast = lambda b, _batch: 1.0 if b.name == "zentorch" else 9.0  # noqa: E731
    monkeypatch.setattr(booth, "measure_p50_ms", fast)
    monkeypatch.setattr(booth, "measure_once_ms", fast)
    monkeypatch.setattr(choice, "top1_agreement", lambda _l, b, _p: 0.985 if b.name == "zentorch" else 1.0)
    backend, why = booth.fastest_measured(cifar)
    assert backend.name != "zentorch" and "left out: zentorch (top-1 agrees on 98.5% of" in why
    monkeypatch.setattr(choice, "top1_agreement", lambda _l, _b, _p: 1.0)
    backend, why = booth.fastest_measured(cifar)
    assert backend.name == "zentorch" and why.startswith("measured p50 on one photo: zentorch 1.0 ms < ")
    assert booth.backend_device(backend, cifar).startswith("CPU")


MIGRAPHX_AFTER_ZENTORCH = """
import sys
from dlguide_core.inference import registry
from dlguide_core.inference.backend_base import BackendOptions, sample_batch
from dlguide_core.vision.models import load_model
loaded = load_model(sys.argv[1], device="cpu")
registry.prepare_backend("zentorch", loaded)
backend = registry.prepare_backend("migraphx", loaded, options=BackendOptions(target="cpu"))
print(tuple(backend.run(sample_batch(loaded, 1)).shape))
"""


@needs_zentorch
@pytest.mark.slow
@pytest.mark.migraphx
def test_migraphx_cpu_still_runs_in_a_process_that_prepared_zentorch_first(cifar_files, isolated_home) -> None:
    """In a fresh process, zentorch first: loading ZenDNN before MIGraphX's cpu target is first used made that
    target refuse every precision ("could not execute a primitive"); zentorch's preparation now probes it first."""
    if not migraphx_lib.status()[0]:
        pytest.skip(f"real MIGraphX not loadable ({migraphx_lib.status()[1]})")
    done = subprocess.run([sys.executable, "-c", MIGRAPHX_AFTER_ZENTORCH, str(cifar_files[0])], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "(1, 10)"
