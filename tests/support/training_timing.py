"""What the training benches measure on a job store (SQLite or PostgreSQL, whichever DLGUIDE_STORE_URL / DLGUIDE_HOME
name): the StoreSink's streaming overhead on a real loop, the end of a step to readable in another process, and the
Train page's live-view redraw at N stored steps (the page's own figure helpers)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from dlguide_core.jobs.store import JobStore
from dlguide_core.jobs.store_sink import StoreSink
from dlguide_core.training.loop import build_run, fit
from dlguide_core.training.metrics import downsample, stride
from dlguide_core.training.recipes import get_recipe
from dlguide_core.training.sinks import NullSink
from tests.support.paths import ROOT
from ui.charts import curve_figure, training_loss_figure


class AlternatingSink(NullSink):
    """Feeds the StoreSink in every other block of `block` steps and records each step's wall time
    (loop + sink) by block kind: interleaving this finely makes load drift on a shared machine
    hit both sides alike, which whole-run A/B comparisons here did not."""

    def __init__(self, store_sink, block: int = 25) -> None:
        self.store_sink, self.block, self.last = store_sink, block, None
        self.times: dict[bool, list[float]] = {True: [], False: []}

    def on_step(self, step, epoch, loss, lr, images_per_s, **extra) -> None:
        streaming = (step // self.block) % 2 == 1
        if streaming:
            self.store_sink.on_step(step, epoch, loss, lr, images_per_s, **extra)
        now = time.perf_counter()
        if self.last is not None:
            self.times[streaming].append(now - self.last)
        self.last = now

    def should_stop(self) -> bool:
        return self.store_sink.should_stop()


def _thread_cpu(native_id: int) -> float:
    import psutil

    for t in psutil.Process().threads():
        if t.id == native_id:
            return t.user_time + t.system_time
    return 0.0


def streaming_overhead(data: Path, epochs: int) -> None:
    """Two estimates: A/B step times interleaved in blocks (noisy on a shared box), and the sink's own
    cost measured directly (time inside on_step + the writer thread's CPU) over the loop's wall time."""
    torch.set_num_threads(1)  # two threads on a shared 2-core box add more noise than signal
    cfg = get_recipe("cifar_net").make_config(data=str(data), epochs=epochs, workers=0, device="cpu")
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store_sink = StoreSink(store.url, job.id)
    sink = AlternatingSink(store_sink)
    run = build_run(cfg, "cifar_net")
    start = time.perf_counter()
    fit(run, sink, None)
    wall = time.perf_counter() - start
    writer_cpu = _thread_cpu(store_sink._writer.native_id)
    store_sink.close()
    streamed = len(sink.times[True])
    without, with_store = (statistics.median(sink.times[k]) for k in (False, True))
    print(f"streaming overhead A/B (cifar_net, batch 4, {streamed * 2} steps, 1 thread): median step "
          f"{without * 1e3:.3f} ms without, {with_store * 1e3:.3f} ms with the store sink -> "
          f"{with_store / without:.4f} (noise floor here: about +-0.07)")
    probe = StoreSink(store.url, store.create("cifar_net", "pytorch", {}).id, flush_s=3600)
    start = time.perf_counter()
    for step in range(1, 10_001):
        probe.on_step(step, 0, 1.0, 0.1, 1.0)
    on_step_s = (time.perf_counter() - start) / 10_000
    start = time.perf_counter()
    probe.flush_now()  # one commit of 10,000 rows, as the writer thread does every 0.25 s with fewer
    commit_per_row = (time.perf_counter() - start) / 10_000
    probe.close()
    sink_cost = streamed * on_step_s + writer_cpu
    print(f"streaming overhead measured directly: on_step {on_step_s * 1e6:.1f} us, commit {commit_per_row * 1e6:.1f}"
          f" us/row, writer thread CPU {writer_cpu * 1e3:.0f} ms over a {wall:.1f} s run with {streamed} streamed "
          f"steps -> ratio {1 + sink_cost / (streamed * with_store):.4f}")
    torch.set_num_threads(os.cpu_count() or 1)


READER = """
import sys, time
from dlguide_core.jobs.store import JobStore
store, job_id, count = JobStore(), sys.argv[1], int(sys.argv[2])  # the store of DLGUIDE_STORE_URL / _HOME
seen, lags = 0, []
print("ready", flush=True)
while seen < count:
    for step, t in zip(*(lambda c: (c["step"], c["time"]))(store.steps(job_id, after=seen))):
        lags.append(time.time() - t)
        seen = step
    time.sleep(0.01)
print(" ".join(f"{x:.4f}" for x in lags))
"""


def _reader_env(store: JobStore) -> dict[str, str]:
    """The reader's store through its environment (a PostgreSQL password never goes in argv)."""
    return {**os.environ, "DLGUIDE_STORE_URL": store.url.raw}


def readable_latency(steps: int, step_s: float) -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    reader = subprocess.Popen([sys.executable, "-c", READER, job.id, str(steps)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, env=_reader_env(store))
    assert reader.stdout.readline().strip() == "ready"
    sink = StoreSink(store.url, job.id)
    for step in range(1, steps + 1):
        time.sleep(step_s)  # stands in for a training step; the row's time is its end
        sink.on_step(step, 0, 1.0, 0.1, 100.0)
    lags = sorted(float(x) for x in reader.communicate(timeout=60)[0].split())
    sink.close()
    p95 = lags[int(0.95 * (len(lags) - 1))]
    print(f"end-of-step -> readable in another process: p50 {statistics.median(lags) * 1e3:.0f} ms, "
          f"p95 {p95 * 1e3:.0f} ms, max {lags[-1] * 1e3:.0f} ms over {len(lags)} steps ({step_s * 1e3:.0f} ms steps)")


def redraw(steps: int, rounds: int = 5, *, tensorflow: bool = False) -> dict[str, float]:
    """The live view's first draw (a full read) and a refresh (an incremental read) at `steps` steps, medians in
    ms; printed too."""
    store = JobStore()
    job = store.create("tf_fashion_mnist" if tensorflow else "cifar_net", "tensorflow" if tensorflow else "pytorch",
                       {})
    now = time.time()
    store.add_steps([(job.id, s, s // 1000, 2.0 / (1 + s / 1000), 0.1, 50.0, now + s * 0.01,
                      json.dumps({"accuracy": min(1.0, s / steps)}) if tensorflow else None)
                     for s in range(1, steps + 1)])
    full, incremental = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        cols = store.steps(job.id)
        figures(cols)
        full.append(time.perf_counter() - start)
        start = time.perf_counter()
        # what a refresh does once the cache holds the rest: check the cache is current, fetch the new rows
        assert store.has_step(job.id, cols["step"][-6], cols["time"][-6])
        store.steps(job.id, after=steps - 5)
        figures(cols)
        incremental.append(time.perf_counter() - start)
    kind = "TensorFlow-style (per-step accuracy)" if tensorflow else "PyTorch-style"
    print(f"live view redraw at {steps:,} steps, {kind}: first draw (full read) "
          f"{statistics.median(full) * 1e3:.0f} ms, refresh (incremental read) "
          f"{statistics.median(incremental) * 1e3:.0f} ms (median of {rounds})")
    return {"first_draw_ms": statistics.median(full) * 1e3, "refresh_ms": statistics.median(incremental) * 1e3}


def figures(cols: dict) -> None:
    loss = training_loss_figure({"job": cols}, 0.6)
    lr = curve_figure({"job": stride(cols["step"], cols["lr"])}, "Learning rate")
    ips = curve_figure({"job": downsample(cols["step"], cols["images_per_s"])}, "Images/s")
    shown = [loss, lr, ips]
    if any(a is not None for a in cols["accuracy"]):  # as the page: a chart only for runs that record it
        shown.append(curve_figure({"job": stride(cols["step"], cols["accuracy"])}, "Training accuracy per batch"))
    for fig in shown:
        fig.to_json()
