"""The Train page's live-view redraw at N stored steps: read from the store, smooth, downsample, build
and serialise the figures (what st.plotly_chart sends), using the page's own helpers.

    .venv/bin/python -m bench.bench_training_view [--steps 100000]

Two runs: a PyTorch-style job (no per-step extras) and a TensorFlow-style job whose every step
carries Keras' running accuracy in the extra JSON column (parsed on read, one more chart).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from dlguide_core.jobs.store import JobStore
from dlguide_core.training.metrics import downsample, stride
from ui.charts import curve_figure, training_loss_figure


def redraw(steps: int, rounds: int = 5, *, tensorflow: bool = False) -> None:
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


def figures(cols: dict) -> None:
    loss = training_loss_figure({"job": cols}, 0.6)
    lr = curve_figure({"job": stride(cols["step"], cols["lr"])}, "Learning rate")
    ips = curve_figure({"job": downsample(cols["step"], cols["images_per_s"])}, "Images/s")
    shown = [loss, lr, ips]
    if any(a is not None for a in cols["accuracy"]):  # as the page: a chart only for runs that record it
        shown.append(curve_figure({"job": stride(cols["step"], cols["accuracy"])}, "Training accuracy per batch"))
    for fig in shown:
        fig.to_json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["DLGUIDE_HOME"] = home
        redraw(args.steps)
        redraw(args.steps, tensorflow=True)


if __name__ == "__main__":
    main()
