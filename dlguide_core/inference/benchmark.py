"""Latency and agreement of each backend against PyTorch eager, on the same preprocessed batch.

For every (backend, batch size): prepare (timed separately as `setup_s`: session creation
or compilation, export excluded), warm up, then N timed runs -> p50/p95 latency and
images/s, plus agreement of its logits with eager PyTorch (max |diff|, top-1, top-5).
Inputs are the bundled photos preprocessed with the model's preset (`backend_base.sample_batch`).

A backend that cannot run here (module, execution provider or GPU missing) gets one row
whose `error` is its availability reason: normal output, not a failure (`run_failed`).

Each row says whether other work ran beside its measurement (`disturbed`: "1 running job, 3 other forwards",
None when nothing did; inference.activity): such a figure is not the backend's own. Rows are handed out as each
finishes (`on_row`), and `should_stop` ends a run between timed runs (the Compiled page's Stop button).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from dlguide_core.errors import DlguideError
from dlguide_core.inference import specs
from dlguide_core.inference.activity import Activity, between, snapshot
from dlguide_core.inference.backend_base import Backend, BackendOptions, BackendUnavailable, Progress, sample_batch
from dlguide_core.inference.backend_torch import TorchBackend
from dlguide_core.inference.registry import backend_class, prepare_backend
from dlguide_core.vision.models import LoadedModel

DEFAULT_BATCH_SIZES = (1, 8, 32)
ROW_KEYS = ("backend", "provider", "batch_size", "p50_ms", "p95_ms", "images_per_s", "max_abs_diff",
            "top1_agree", "top5_agree", "setup_s", "disturbed")  # the `bench --json` contract (error rows add `error`)
Watch = Callable[[], Activity]  # a sample of what else runs (activity.snapshot)


@dataclass(frozen=True)
class BenchConfig:
    backends: tuple[str, ...] = (specs.TORCH, specs.ONNXRUNTIME)
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    iters: int = 20
    warmup: int = 3
    options: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        for name in self.backends:
            backend_class(name)  # ValueError naming the valid choices
        if self.iters < 1 or self.warmup < 0 or not self.batch_sizes or min(self.batch_sizes) < 1:
            raise ValueError("iters and batch sizes must be at least 1, warmup at least 0")


@dataclass(frozen=True)
class BenchRow:
    """One backend at one batch size; `error` (and None numbers) when it could not run.

    `unavailable` says the error is the backend's availability reason (it cannot run on this
    machine) rather than a failure while running; it is not part of the JSON contract."""

    backend: str
    provider: str | None = None
    batch_size: int | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    images_per_s: float | None = None
    max_abs_diff: float | None = None
    top1_agree: float | None = None
    top5_agree: float | None = None
    setup_s: float | None = None
    error: str | None = None
    unavailable: bool = False
    disturbed: str | None = None  # what else ran during the measurement, in words; None: nothing did

    def to_json(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in ROW_KEYS}
        if self.error is not None:
            data["error"] = self.error
        return data


class Stopped(Exception):
    """A benchmark asked to stop (`should_stop`), raised between two timed runs."""


def time_runs(fn: Callable[[], Any], *, warmup: int, iters: int) -> list[float]:
    """Milliseconds of each of `iters` calls to `fn`, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def latency_stats(times_ms: Sequence[float], batch_size: int) -> dict[str, float]:
    """p50/p95 latency per batch, and images/s from the mean batch time."""
    arr = np.asarray(times_ms, dtype=np.float64)
    return {"p50_ms": round(float(np.percentile(arr, 50)), 3), "p95_ms": round(float(np.percentile(arr, 95)), 3),
            "images_per_s": round(batch_size * 1000.0 / float(arr.mean()), 2)}


def agreement(reference: torch.Tensor, logits: torch.Tensor, k: int = 5) -> dict[str, float]:
    """How closely `logits` follow the reference (PyTorch eager) on the same batch, both (B, C).

    top1_agree: fraction of rows with the same arg-max; top5_agree: fraction whose top-k
    index sets are equal (order inside the top-k is ignored: near-ties may swap)."""
    reference, logits = reference.float(), logits.float()
    k = min(k, reference.shape[1])
    same_top1 = reference.argmax(dim=1) == logits.argmax(dim=1)
    ref_top = reference.topk(k, dim=1).indices.sort(dim=1).values
    top = logits.topk(k, dim=1).indices.sort(dim=1).values
    return {"max_abs_diff": float((reference - logits).abs().max()),
            "top1_agree": float(same_top1.float().mean()),
            "top5_agree": float((ref_top == top).all(dim=1).float().mean())}


def measure(backend: Backend, batch: torch.Tensor, reference: torch.Tensor, *, warmup: int,
            iters: int, stop: Callable[[], bool] | None = None) -> BenchRow:
    """Time `backend` on `batch` and compare its logits with the eager `reference` logits; Stopped between two
    runs once `stop()` says so."""

    def run() -> torch.Tensor:
        if stop is not None and stop():
            raise Stopped
        return backend.run(batch)

    logits = run()
    stats = latency_stats(time_runs(run, warmup=warmup, iters=iters), len(batch))
    agree = {k: round(v, 6) for k, v in agreement(reference, logits).items()}
    return BenchRow(backend.name, backend.provider, len(batch), stats["p50_ms"], stats["p95_ms"], stats["images_per_s"],
                    agree["max_abs_diff"], agree["top1_agree"], agree["top5_agree"], setup_s=round(backend.setup_s, 3))


def options_for(name: str, options: BackendOptions) -> BackendOptions:
    # The PyTorch row is the fp32 baseline whatever precision the compiled backends use.
    return replace(options, precision="fp32") if name == specs.BASELINE else options


def run_benchmark(loaded: LoadedModel, config: BenchConfig, progress: Progress | None = None, *,
                  on_row: Callable[[BenchRow], None] | None = None, should_stop: Callable[[], bool] | None = None,
                  watch: Watch | None = None) -> list[BenchRow]:
    """Rows for every (backend, batch size) of `config`; unavailable backends get one error row. Each row goes to
    `on_row` as it is made; once `should_stop()` says so the run ends with the rows made so far."""
    progress = progress or (lambda _msg, _frac: None)
    stop = should_stop or (lambda: False)
    watch = watch or snapshot  # activity.snapshot: other forwards of this process, jobs running here
    eager = TorchBackend().prepare(loaded)
    rows: list[BenchRow] = []
    steps = max(1, len(config.backends) * len(config.batch_sizes))

    def add(row: BenchRow) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    try:
        for b_index, name in enumerate(config.backends):
            options = options_for(name, config.options)
            status = backend_class(name).availability(options)
            if not status.available:
                add(BenchRow(name, error=f"{status.title} is unavailable: {status.reason}", unavailable=True))
                continue
            for s_index, batch_size in enumerate(config.batch_sizes):
                if stop():
                    raise Stopped
                progress(f"{status.title} at batch {batch_size}…",
                         (b_index * len(config.batch_sizes) + s_index) / steps)
                add(_bench_one(name, loaded, eager, batch_size, options, config, stop, watch))
    except Stopped:
        progress("Stopped", len(rows) / steps)
        return rows
    progress("Done", 1.0)
    return rows


def _bench_one(name: str, loaded: LoadedModel, eager: Backend, batch_size: int, options: BackendOptions,
               config: BenchConfig, stop: Callable[[], bool], watch: Watch) -> BenchRow:
    batch = sample_batch(loaded, batch_size)  # (batch_size, 3, crop, crop), same for every backend
    try:
        reference = eager.run(batch)
        plain_torch = name == specs.BASELINE and not options.torch_compile
        backend = eager if plain_torch else prepare_backend(name, loaded, batch_size=batch_size, options=options)
        before = watch()  # after preparing: a compile is not timed, what runs beside it does not matter
        row = measure(backend, batch, reference, warmup=config.warmup, iters=config.iters, stop=stop)
        return replace(row, disturbed=between(before, watch()).describe())
    except BackendUnavailable as exc:  # availability changed between the check and prepare
        return BenchRow(name, batch_size=batch_size, error=str(exc), unavailable=True)
    except DlguideError as exc:
        return BenchRow(name, batch_size=batch_size, error=str(exc))


def rows_to_json(rows: Sequence[BenchRow]) -> list[dict[str, Any]]:
    return [row.to_json() for row in rows]


def run_failed(rows: Sequence[BenchRow]) -> bool:
    """The `bench` exit rule: failed when an available backend errored while preparing or running,
    or when no row has numbers. An unavailable backend's error row alone is normal output."""
    return all(r.error for r in rows) or any(r.error and not r.unavailable for r in rows)


def speedups(rows: Sequence[BenchRow], baseline: str = specs.BASELINE) -> dict[tuple[str, int | None], float]:
    """(backend, batch size) -> baseline p50 / backend p50, for rows where both ran."""
    base = {r.batch_size: r.p50_ms for r in rows if r.backend == baseline and r.p50_ms}
    return {(r.backend, r.batch_size): round(base[r.batch_size] / r.p50_ms, 2)
            for r in rows if r.p50_ms and r.batch_size in base}


def results_table(rows: Sequence[BenchRow], baseline: str = specs.BASELINE) -> list[dict[str, Any]]:
    """The rows that ran, as JSON records plus `speedup`: how many times faster than the `baseline`
    backend's row at the same batch size (p50 over p50; None without a baseline row)."""
    ratio = speedups(rows, baseline)
    return [{**r.to_json(), "speedup": ratio.get((r.backend, r.batch_size))} for r in rows if r.error is None]
