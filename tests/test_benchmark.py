"""Benchmark rows: timing statistics, agreement with eager, error rows, and the JSON contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dlguide_core.backends import BackendOptions
from dlguide_core.benchmark import (
    ROW_KEYS,
    BenchConfig,
    BenchRow,
    latency_stats,
    rows_to_json,
    run_benchmark,
    speedups,
    time_runs,
)
from dlguide_core.models import load_model
from tests.compiled_helpers import exported_cifar, seed_export_cache


@pytest.fixture(scope="module")
def cifar_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return exported_cifar(tmp_path_factory.mktemp("bench"))


@pytest.fixture
def cifar(cifar_files):
    loaded = load_model(str(cifar_files[0]), device="cpu")
    seed_export_cache(loaded, cifar_files[1])
    return loaded


def test_time_runs_warms_up_then_times_each_call():
    calls = []
    times = time_runs(lambda: calls.append(1), warmup=2, iters=5)
    assert len(calls) == 7 and len(times) == 5 and all(t >= 0 for t in times)


def test_latency_stats_percentiles_and_throughput():
    stats = latency_stats([10.0, 20.0, 30.0, 40.0, 100.0], batch_size=8)
    assert stats["p50_ms"] == 30.0
    assert stats["p95_ms"] == pytest.approx(88.0)
    assert stats["images_per_s"] == pytest.approx(8 * 1000 / 40.0)


def test_rows_for_each_backend_and_batch_with_agreement(cifar, monkeypatch):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    config = BenchConfig(backends=("torch", "onnxruntime", "migraphx"), batch_sizes=(1, 3), iters=2, warmup=1)
    seen = []
    rows = run_benchmark(cifar, config, progress=lambda msg, frac: seen.append(frac))
    ok = [r for r in rows if r.error is None]
    assert [(r.backend, r.batch_size) for r in ok] == [("torch", 1), ("torch", 3), ("onnxruntime", 1),
                                                       ("onnxruntime", 3)]
    for row in ok:
        assert row.p50_ms > 0 and row.p95_ms >= row.p50_ms and row.images_per_s > 0 and row.setup_s >= 0
        assert row.top1_agree == row.top5_agree == 1.0 and row.max_abs_diff <= 1e-4
    assert ok[2].provider == "CPUExecutionProvider"
    (error,) = [r for r in rows if r.error]
    assert error.backend == "migraphx" and "migraphx not installed" in error.error
    assert seen[-1] == 1.0 and seen == sorted(seen)
    assert set(speedups(rows)) == {("torch", 1), ("torch", 3), ("onnxruntime", 1), ("onnxruntime", 3)}


def test_json_rows_have_exactly_the_contract_keys():
    rows = rows_to_json([BenchRow("torch", "cpu", 1, 1.0, 2.0, 3.0, 0.0, 1.0, 1.0, 0.0),
                         BenchRow("migraphx", error="MIGraphX is unavailable: module migraphx not installed")])
    assert list(rows[0]) == list(ROW_KEYS)
    assert list(rows[1]) == [*ROW_KEYS, "error"] and rows[1]["p50_ms"] is None
    json.dumps(rows)  # plain JSON types only


def test_a_backend_that_fails_to_prepare_gets_an_error_row_per_batch(cifar):
    config = BenchConfig(backends=("onnxruntime",), batch_sizes=(1,), iters=1, warmup=0,
                         options=BackendOptions(precision="fp16"))
    (row,) = run_benchmark(cifar, config)
    assert row.batch_size == 1 and "needs the MIGraphX execution provider" in row.error


def test_torch_row_stays_fp32_whatever_the_compiled_precision(cifar):
    config = BenchConfig(backends=("torch",), batch_sizes=(2,), iters=1, warmup=0,
                         options=BackendOptions(precision="fp16"))
    (row,) = run_benchmark(cifar, config)
    assert row.error is None and row.max_abs_diff == 0.0


def test_config_validates_names_and_counts():
    with pytest.raises(ValueError, match="unknown backend"):
        BenchConfig(backends=("tvm",))
    with pytest.raises(ValueError, match="at least 1"):
        BenchConfig(iters=0)
