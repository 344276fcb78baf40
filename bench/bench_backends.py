"""ONNX Runtime and MIGraphX vs PyTorch eager p50 latency for Inception v3, batch 1 and 8, in one run.

    .venv/bin/python -m bench.bench_backends [--weights standin] [--rounds 3] [--iters 5] [--threads 0]
        [--migraphx fp32,fp16,bf16,int8]   # MIGraphX precisions to add (where its module loads; "" for none)

Four paths on the same preprocessed batch (the bundled photos, `presets.preprocess`):
PyTorch eager as the guide runs it (NCHW), dlguide's eager path (channels_last on the CPU),
ONNX Runtime fp32 and ONNX Runtime int8 (static QDQ). They are timed in alternating rounds
so load from other processes hits all alike; the ratios are what counts. Each row also
reports agreement with the guide's eager logits. MIGraphX (its gpu target on a ROCm host, else
"MIGraphX (CPU)") compiles one program per batch size and precision; its compile time and the
second start (gpu: the saved .mxr loaded; cpu: compiled again, issue 26) are printed under the table. Prints Markdown.
"""

from __future__ import annotations

import os
import platform
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bench.common import parser as parser_
from bench.common import report, result
from dlguide_core.errors import DlguideError
from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import Backend, BackendOptions, sample_batch
from dlguide_core.inference.benchmark import agreement, time_runs
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.vision.models import LoadedModel, load_model
from tests.support.cpu_paths import HOLDOUT, GuideEager, standin_weights

Timed = Backend | GuideEager  # what the table times: a prepared backend or the guide's own eager call


def measure(backends: dict[str, Timed], batch: torch.Tensor, rounds: int, iters: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in backends}
    for round_index in range(rounds):
        for name, backend in backends.items():
            warmup = 2 if round_index == 0 else 1
            times[name] += time_runs(partial(backend.run, batch), warmup=warmup, iters=iters)
    return times


def holdout_agreement(paths: dict[str, Timed], loaded: LoadedModel, folder: Path,
                      limit: int = 64) -> dict[str, dict[str, float]]:
    """Agreement with the guide's eager path on images the int8 calibration never saw."""
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.presets import preprocess

    files = sorted(folder.glob("*.JPEG"))[:limit]
    batch = preprocess([load_image(f) for f in files], loaded.preset)
    reference = paths["guide eager"].run(batch)
    return {name: agreement(reference, path.run(batch)) for name, path in paths.items()}


def migraphx_paths(loaded: LoadedModel, size: int, precisions: list[str], notes: list[str]) -> dict[str, Timed]:
    """MIGraphX compiled for `size` at each precision (compile timed), then prepared again as a second start
    would (gpu target: the saved .mxr loaded, timed; cpu target: compiled again, issue 26): that second
    start is what is benchmarked, as `bench` and the app run it. Empty where MIGraphX does not load."""
    from dlguide_core.inference.backend_migraphx import MigraphxBackend

    out: dict[str, Timed] = {}
    for precision in precisions:
        options = BackendOptions(precision=precision)
        status = MigraphxBackend.availability(options)
        if not status.available:
            notes.append(f"- {status.title} {precision}: {status.reason}")
            continue
        try:
            first = prepare_backend(specs.MIGRAPHX, loaded, batch_size=size, options=options)
        except DlguideError as exc:  # e.g. a precision that gives wrong answers for this model
            notes.append(f"- {status.title} {precision}, batch {size}: refused: {exc}")
            continue
        again = prepare_backend(specs.MIGRAPHX, loaded, batch_size=size, options=options)
        assert isinstance(first, MigraphxBackend) and isinstance(again, MigraphxBackend)
        info, loaded_info = first.describe(), again.describe()
        compile_s = info.compile_s if info.compile_s is not None else info.saved_compile_s
        mib = Path(loaded_info.mxr or "").stat().st_size / 2**20
        second = (f".mxr load {loaded_info.load_s:.2f} s" if loaded_info.load_s is not None
                  else f"second start compiles again ({loaded_info.compile_s:.1f} s)")
        notes.append(f"- {again.label} {precision}, batch {size}: compile {compile_s:.1f} s"
                     f"{'' if info.compile_s is not None else ' (earlier run)'}, {second} ({mib:.0f} MiB)")
        out[f"{again.label} {precision}"] = again
    return out


def main() -> None:
    parser = parser_(__doc__)
    parser.add_argument("--weights", default="standin", help="standin (default), imagenet, none or a checkpoint")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="ORT intra-op threads (0: one per physical core)")
    parser.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    parser.add_argument("--graph-optimization", default="all", choices=("all", "extended", "basic", "disabled"))
    parser.add_argument("--migraphx", default="fp32,fp16,bf16,int8", help="MIGraphX precisions ('' for none)")
    parser.add_argument("--holdout", type=int, default=64, help="val photos for the agreement check (0: none)")
    args = parser.parse_args()
    if args.quick:  # batch 1, one round of one run, the eager paths only (no ONNX export, no MIGraphX compile)
        args.batch_sizes, args.rounds, args.iters, args.migraphx, args.holdout = "1", 1, 1, "", 0

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    label = standin_weights() if args.weights == "standin" else args.weights
    loaded = load_model("imagenet" if args.weights == "standin" else args.weights, device="cpu")
    options = BackendOptions(target="cpu", intra_op_threads=args.threads, graph_optimization=args.graph_optimization)
    paths: dict[str, Timed] = {"guide eager": GuideEager(loaded.model),
                               "dlguide eager": prepare_backend(specs.TORCH, loaded)}
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), graph opt {args.graph_optimization}, "
          f"intra-op threads {args.threads or 'default'}; weights: {label}; "
          f"load average {os.getloadavg()[0]:.1f} (other processes share these cores)")
    if not args.quick:
        paths["ORT fp32"] = ort = prepare_backend(specs.ONNXRUNTIME, loaded, options=options)
        int8 = prepare_backend(specs.ONNXRUNTIME, loaded, options=replace(options, precision="int8"))
        paths["ORT int8"] = int8
        assert ort.export is not None  # ONNX Runtime runs an export
        print(f"# ORT {ort.provider}; ONNX export {ort.export.export_s:.1f} s "
              f"({'cached' if ort.export.cached else 'fresh'}), ORT session {ort.setup_s:.2f} s, int8 "
              f"quantise+session {int8.setup_s:.2f} s")
    print(f"# {args.rounds} rounds x {args.iters} runs per path\n")
    print("| batch | path | p50 ms | speed-up vs guide eager | max abs diff / max abs logit | top-1 agree "
          "| top-5 agree |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    compiled: list[str] = []
    p50s: dict[str, float] = {}
    for size in (int(s) for s in args.batch_sizes.split(",")):
        batch = sample_batch(loaded, size)  # (size, 3, 299, 299)
        reference = paths["guide eager"].run(batch)
        scale = float(reference.abs().max())
        sized = {**paths, **migraphx_paths(loaded, size, [p for p in args.migraphx.split(",") if p], compiled)}
        times = measure(sized, batch, args.rounds, args.iters)
        base = float(np.percentile(times["guide eager"], 50))
        for name, path in sized.items():
            agree = agreement(reference, path.run(batch))
            p50 = p50s[f"batch {size} {name}"] = float(np.percentile(times[name], 50))
            print(f"| {size} | {name} | {p50:.1f} | {base / p50:.2f}x | {agree['max_abs_diff'] / scale:.1e} "
                  f"| {agree['top1_agree']:.2f} | {agree['top5_agree']:.2f} |", flush=True)
    for line in compiled:
        print(line)
    if HOLDOUT.is_dir() and args.holdout:
        print(f"\nAgreement with the guide's eager path on {HOLDOUT} (first {args.holdout} images; never used for "
              "calibration):")
        for name, agree in holdout_agreement(paths, loaded, HOLDOUT, args.holdout).items():
            print(f"- {name}: top-1 {agree['top1_agree']:.3f}, top-5 {agree['top5_agree']:.3f}, "
                  f"max abs diff {agree['max_abs_diff']:.2e}")
    report(result("bench_backends", {"weights": label, "p50_ms": p50s, "notes": compiled}), args.json)


if __name__ == "__main__":
    main()
