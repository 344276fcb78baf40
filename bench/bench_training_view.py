"""The Train page's live-view redraw at N stored steps: read from the store, smooth, downsample, build
and serialise the figures (what st.plotly_chart sends), using the page's own helpers."""

from __future__ import annotations

import statistics
import time

from dlguide_core.jobs import JobStore
from dlguide_core.metrics import downsample, stride
from pages.common import curve_figure, training_loss_figure


def redraw(steps: int, rounds: int = 5) -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    now = time.time()
    store.add_steps([(job.id, s, s // 1000, 2.0 / (1 + s / 1000), 0.1, 50.0, now + s * 0.01, None)
                     for s in range(1, steps + 1)])
    full, incremental = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        cols = store.steps(job.id)
        figures(cols)
        full.append(time.perf_counter() - start)
        start = time.perf_counter()
        store.steps(job.id, after=steps - 5)  # what a refresh fetches once the cache holds the rest
        figures(cols)
        incremental.append(time.perf_counter() - start)
    print(f"live view redraw at {steps:,} steps: first draw (full read) {statistics.median(full) * 1e3:.0f} ms, "
          f"refresh (incremental read) {statistics.median(incremental) * 1e3:.0f} ms (median of {rounds})")


def figures(cols: dict) -> None:
    loss = training_loss_figure({"job": cols}, 0.6)
    lr = curve_figure({"job": stride(cols["step"], cols["lr"])}, "Learning rate")
    ips = curve_figure({"job": downsample(cols["step"], cols["images_per_s"])}, "Images/s")
    for fig in (loss, lr, ips):
        fig.to_json()
