"""Every CPU backend of the registry on Inception v3, batch 1, fp32, against the machine's floor, in one run.

    nice -n 5 .venv/bin/python -m bench.bench_cpu_backends [--rounds 4] [--iters 5]

Variants, each prepared the way the app prepares it (`registry.prepare_backend`, setup timed): eager NCHW (the
guide), eager channels_last (dlguide's torch backend), torch.compile inductor (`--torch-compile`), zentorch
(torch.compile with AMD's ZenDNN plugin, where installed), ONNX Runtime fp32 and MIGraphX (CPU) fp32 (where
they load). They are timed in alternating rounds (rounds x iters runs each, after warm-up) with the fp32
matmul peak in every round, so load from other processes hits all alike; the floor is FLOPs per forward over
that peak (bench/bench_cpu_floor.py). Each row: p50, p50 / floor, p50 vs eager channels_last, setup (compile)
seconds, and agreement with eager NCHW on the bundled photos. Prints Markdown.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from bench.common import parser, report, result
from dlguide_core.errors import DlguideError
from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import BackendOptions, sample_batch
from dlguide_core.inference.benchmark import agreement, time_runs
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.threads import physical_cores
from dlguide_core.vision.models import load_model
from dlguide_core.vision.samples import bundled_samples
from tests.support.cpu_paths import GuideEager, forward_flops, matmul_gflops, standin_weights

Run = Callable[[torch.Tensor], torch.Tensor]  # (B, 3, 299, 299) -> (B, 1000)
CPU = BackendOptions(target="cpu")
VARIANTS = (  # (row, backend name, options)
    ("eager channels_last (dlguide)", specs.TORCH, BackendOptions()),
    ("torch.compile inductor", specs.TORCH, BackendOptions(torch_compile="inductor")),
    ("zentorch (torch.compile, ZenDNN)", specs.ZENTORCH, CPU),
    ("ONNX Runtime fp32", specs.ONNXRUNTIME, CPU),
    ("MIGraphX (CPU) fp32", specs.MIGRAPHX, CPU),
)


def build(loaded, quick: bool = False) -> tuple[dict[str, Run], dict[str, float], list[str]]:
    """Every variant prepared (`quick`: the eager ones only: no compile, no export)."""
    runs: dict[str, Run] = {"eager NCHW (the guide)": GuideEager(loaded.model).run}
    setup, notes = {"eager NCHW (the guide)": 0.0}, []
    for row, name, options in VARIANTS[:1] if quick else VARIANTS:
        start = time.perf_counter()
        try:
            backend = prepare_backend(name, loaded, options=options)
        except DlguideError as exc:
            notes.append(f"- {row}: not measured: {exc}")
            continue
        runs[row], setup[row] = backend.run, time.perf_counter() - start
        print(f"# prepared {row} in {setup[row]:.1f} s ({backend.provider})", flush=True)
    return runs, setup, notes


def measure(runs: dict[str, Run], batch: torch.Tensor, rounds: int, iters: int) -> tuple[dict, list]:
    times: dict[str, list[float]] = {row: [] for row in runs}
    peaks = []
    for index in range(rounds):
        for row, run in runs.items():
            times[row] += time_runs(partial(run, batch), warmup=2 if index == 0 else 1, iters=iters)
        peaks.append(max(matmul_gflops().values()))
        print(f"# round {index + 1}/{rounds}, load average {os.getloadavg()[0]:.1f}", flush=True)
    return times, peaks


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=4)
    options.add_argument("--iters", type=int, default=5)
    args = options.parse_args()
    if args.quick:  # the eager variants, one round of one run
        args.rounds, args.iters = 1, 1

    label = standin_weights()
    loaded = load_model("imagenet", device="cpu")
    batch = sample_batch(loaded, 1)  # (1, 3, 299, 299)
    photos = sample_batch(loaded, len(bundled_samples()))  # each bundled photo once
    flops = forward_flops(GuideEager(loaded.model).model, batch)
    started = time.perf_counter()
    runs, setup, notes = build(loaded, args.quick)
    times, peaks = measure(runs, batch, args.rounds, args.iters)
    floor_ms = flops / (float(np.median(peaks)) * 1e9) * 1000
    print(f"\n# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs ({physical_cores()} physical), "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}; weights: {label}; load average {os.getloadavg()[0]:.1f} "
          f"(shared with other work); whole run {time.perf_counter() - started:.0f} s")
    print(f"# Inception v3 {flops / 1e9:.2f} GFLOP per forward; fp32 matmul peak median {np.median(peaks):.0f} "
          f"GFLOP/s -> floor {floor_ms:.1f} ms; {args.rounds} rounds x {args.iters} runs per variant\n")
    print("| variant | p50 ms | p50 / floor | vs eager channels_last | setup s | max abs diff | top-1 agree |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = float(np.median(times["eager channels_last (dlguide)"]))
    with torch.no_grad():
        reference = runs["eager NCHW (the guide)"](photos)
        for row, values in sorted(times.items(), key=lambda kv: np.median(kv[1])):
            # one photo at a time: a compiled graph is specialised to batch 1, a batch of 2 would compile again
            logits = torch.cat([runs[row](photo[None]) for photo in photos])
            p50, agree = float(np.median(values)), agreement(reference, logits)
            print(f"| {row} | {p50:.1f} | {p50 / floor_ms:.2f}x | {base / p50:.2f}x | {setup[row]:.1f} "
                  f"| {agree['max_abs_diff']:.1e} | {agree['top1_agree']:.2f} |")
    for line in notes:
        print(line)
    report(result("bench_cpu_backends", {"weights": label, "floor_ms": floor_ms, "setup_s": setup, "notes": notes,
                                         "p50_ms": {row: float(np.median(v)) for row, v in times.items()}}), args.json)


if __name__ == "__main__":
    main()
