"""Benchmark rows: timing statistics, agreement with eager, error rows, and the JSON contract."""

from __future__ import annotations

import json
import sys

import pytest

from dlguide_core.inference.backend_base import BackendError, BackendOptions
from dlguide_core.inference.backend_onnxruntime import OnnxRuntimeBackend
from dlguide_core.inference.benchmark import (
    ROW_KEYS,
    BenchConfig,
    BenchRow,
    latency_stats,
    results_table,
    rows_to_json,
    run_benchmark,
    run_failed,
    speedups,
    time_runs,
)


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
    assert error.backend == "migraphx" and "migraphx not installed" in error.error and error.unavailable
    assert seen[-1] == 1.0 and seen == sorted(seen)
    assert set(speedups(rows)) == {("torch", 1), ("torch", 3), ("onnxruntime", 1), ("onnxruntime", 3)}


def test_json_rows_have_exactly_the_contract_keys():
    rows = rows_to_json([BenchRow("torch", "cpu", 1, 1.0, 2.0, 3.0, 0.0, 1.0, 1.0, 0.0),
                         BenchRow("migraphx", error="MIGraphX is unavailable: module migraphx not installed",
                                  unavailable=True)])
    assert list(rows[0]) == list(ROW_KEYS)
    assert list(rows[1]) == [*ROW_KEYS, "error"] and rows[1]["p50_ms"] is None  # `unavailable` stays out
    json.dumps(rows)  # plain JSON types only


def test_a_precision_the_provider_lacks_is_an_unavailable_row(cifar):
    config = BenchConfig(backends=("onnxruntime",), batch_sizes=(1, 2), iters=1, warmup=0,
                         options=BackendOptions(precision="fp16"))
    (row,) = run_benchmark(cifar, config)
    assert row.unavailable and row.batch_size is None and "needs the MIGraphX execution provider" in row.error


def test_a_backend_that_fails_while_running_gets_an_error_row_per_batch(cifar, monkeypatch):
    def broken_run(self, batch):
        raise BackendError("ONNX Runtime failed: device lost")

    monkeypatch.setattr(OnnxRuntimeBackend, "run", broken_run)
    config = BenchConfig(backends=("torch", "onnxruntime"), batch_sizes=(1, 2), iters=1, warmup=0)
    rows = run_benchmark(cifar, config)
    failed = [r for r in rows if r.error]
    assert [(r.backend, r.batch_size, r.unavailable) for r in failed] == [("onnxruntime", 1, False),
                                                                          ("onnxruntime", 2, False)]
    assert all("device lost" in r.error for r in failed) and run_failed(rows)


def _ok(backend: str, batch: int, p50: float) -> BenchRow:
    return BenchRow(backend, "cpu", batch, p50, p50, 1.0, 0.0, 1.0, 1.0, 0.0)


UNAVAILABLE = BenchRow("migraphx", error="MIGraphX is unavailable: module migraphx not installed", unavailable=True)
FAILED = BenchRow("onnxruntime", batch_size=1, error="ONNX Runtime failed: device lost")


@pytest.mark.parametrize("rows,failed", [
    ([_ok("torch", 1, 5.0), UNAVAILABLE], False),  # an unavailable backend is normal output
    ([_ok("torch", 1, 5.0)], False),
    ([_ok("torch", 1, 5.0), FAILED], True),  # an available backend failed
    ([UNAVAILABLE], True),  # nothing produced numbers
    ([], True),
])
def test_run_failed_counts_failures_not_unavailable_backends(rows, failed):
    assert run_failed(rows) is failed


def test_results_table_adds_the_speedup_over_torch_at_the_same_batch():
    rows = [_ok("torch", 1, 10.0), _ok("onnxruntime", 1, 4.0), _ok("onnxruntime", 8, 20.0), UNAVAILABLE]
    table = results_table(rows)
    assert [(r["backend"], r["batch_size"], r["speedup"]) for r in table] == [
        ("torch", 1, 1.0), ("onnxruntime", 1, 2.5), ("onnxruntime", 8, None)]  # no torch row at batch 8
    assert list(table[0]) == [*ROW_KEYS, "speedup"]


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


def test_a_row_says_what_ran_beside_its_measurement(cifar):
    # issue 31: eager batch 1 read 332 ms while another visitor classified, 19 ms alone, with no warning
    from dlguide_core.inference.activity import Activity

    samples = iter([Activity(5, frozenset({"job1"})), Activity(8, frozenset({"job1"})),  # batch 1: before, after
                    Activity(8, frozenset()), Activity(8, frozenset())])  # batch 2: nothing else ran
    config = BenchConfig(backends=("torch",), batch_sizes=(1, 2), iters=1, warmup=0)
    busy, quiet = run_benchmark(cifar, config, watch=lambda: next(samples))
    assert busy.disturbed == "1 running job, 3 other forwards" and quiet.disturbed is None
    assert [r["disturbed"] for r in rows_to_json([busy, quiet])] == ["1 running job, 3 other forwards", None]


def test_a_row_measured_under_outside_load_says_so(cifar):
    """Issue 43 (11): other processes' CPU time (another server's booth visitors) distorted rows with no note."""
    from dlguide_core.inference.activity import Activity, CpuSample

    samples = iter([Activity(0, frozenset(), CpuSample(100.0, 10.0, 0.0, 2)),
                    Activity(0, frozenset(), CpuSample(103.0, 11.0, 2.0, 2)),  # others: 2 s of CPU in 2 s
                    Activity(0, frozenset(), CpuSample(103.0, 11.0, 2.0, 2)),
                    Activity(0, frozenset(), CpuSample(104.05, 12.0, 3.0, 2))])  # 0.05 s: the box's daemons
    config = BenchConfig(backends=("torch",), batch_sizes=(1, 2), iters=1, warmup=0)
    busy, quiet = run_benchmark(cifar, config, watch=lambda: next(samples))
    assert busy.disturbed == "other processes: 1.0 of 2 cores" and quiet.disturbed is None


def test_the_machines_load_is_read_from_proc_stat_against_this_processs_own(tmp_path):
    import subprocess
    import sys
    import time

    from dlguide_core.inference.activity import between, cpu_sample, snapshot

    if cpu_sample() is None:
        pytest.skip("no /proc/stat here")
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # it runs
        before = snapshot()
        time.sleep(2.0)
        after = snapshot()
    finally:
        burner.kill()
        burner.wait()
    seen = between(before, after)
    assert seen.outside_cores >= 0.3 and f"of {seen.cores} cores" in (seen.describe() or ""), seen
    own = cpu_sample()
    sum(i * i for i in range(3_000_000))  # this process's own work is never "other processes"
    assert cpu_sample().own_s > own.own_s


def test_every_gated_forward_is_counted_and_a_benchmarks_own_runs_are_not(cifar):
    from dlguide_core.inference.activity import snapshot
    from dlguide_core.vision.classify import forward_slot

    before = snapshot(jobs=frozenset)
    with forward_slot(), forward_slot():  # re-entrant: one forward
        pass
    run_benchmark(cifar, BenchConfig(backends=("torch",), batch_sizes=(1,), iters=2, warmup=0), watch=snapshot)
    assert snapshot(jobs=frozenset).forwards - before.forwards == 1


def test_rows_arrive_as_each_finishes_and_a_run_can_be_stopped(cifar):
    config = BenchConfig(backends=("torch", "onnxruntime"), batch_sizes=(1, 2), iters=1, warmup=0)
    arrived = []
    rows = run_benchmark(cifar, config, on_row=arrived.append, should_stop=lambda: len(arrived) >= 1)
    assert [(r.backend, r.batch_size) for r in rows] == [("torch", 1)] and arrived == rows
