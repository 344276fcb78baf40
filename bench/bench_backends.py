"""ONNX Runtime vs PyTorch eager p50 latency for Inception v3, batch 1 and 8, in one run.

    .venv/bin/python bench/bench_backends.py [--weights none] [--rounds 3] [--iters 5] [--threads 0]

The two backends are timed in alternating rounds (torch, ort, torch, ort, ...) so that
load from other processes on a shared machine hits both alike; the ratio is what counts.
Both run the same preprocessed batch (the bundled photos, `presets.preprocess`), and
the ONNX logits are checked against eager before timing. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlguide_core.backends import BackendOptions, agreement, prepare_backend, sample_batch  # noqa: E402
from dlguide_core.benchmark import time_runs  # noqa: E402
from dlguide_core.models import load_model  # noqa: E402


def measure(backends: dict, batch: torch.Tensor, rounds: int, iters: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in backends}
    for round_index in range(rounds):
        for name, backend in backends.items():
            warmup = 2 if round_index == 0 else 1
            times[name] += time_runs(lambda b=backend: b.run(batch), warmup=warmup, iters=iters)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default="none", help="imagenet, none or a checkpoint (latency ignores values)")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="ORT intra-op threads (0: one per physical core)")
    parser.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    parser.add_argument("--graph-optimization", default="all", choices=("all", "extended", "basic", "disabled"))
    args = parser.parse_args()

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    loaded = load_model(args.weights, device="cpu")
    options = BackendOptions(target="cpu", intra_op_threads=args.threads, graph_optimization=args.graph_optimization)
    ort = prepare_backend("onnxruntime", loaded, options=options)
    eager = prepare_backend("torch", loaded)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), ORT {ort.provider}, graph opt {args.graph_optimization}, "
          f"intra-op threads {args.threads or 'default'}; {loaded.label}; "
          f"load average {os.getloadavg()[0]:.1f} (other processes share these cores)")
    print(f"# ONNX export {ort.export.export_s:.1f} s ({'cached' if ort.export.cached else 'fresh'}), "
          f"ORT session {ort.setup_s:.2f} s; {args.rounds} rounds x {args.iters} runs per backend\n")
    print("| batch | PyTorch eager p50 ms | ONNX Runtime p50 ms | speed-up | max abs diff / max abs logit "
          "| top-5 agree |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in (int(s) for s in args.batch_sizes.split(",")):
        batch = sample_batch(loaded, size)  # (size, 3, 299, 299)
        reference = eager.run(batch)
        agree = agreement(reference, ort.run(batch))
        scale = float(reference.abs().max())  # untrained logits are huge: report the difference relative
        times = measure({"torch": eager, "onnxruntime": ort}, batch, args.rounds, args.iters)
        p50 = {name: float(np.percentile(t, 50)) for name, t in times.items()}
        print(f"| {size} | {p50['torch']:.1f} | {p50['onnxruntime']:.1f} | {p50['torch'] / p50['onnxruntime']:.2f}x "
              f"| {agree['max_abs_diff'] / scale:.1e} | {agree['top5_agree']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
