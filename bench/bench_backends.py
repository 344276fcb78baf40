"""ONNX Runtime and MIGraphX vs PyTorch eager p50 latency for Inception v3, batch 1 and 8, in one run.

    .venv/bin/python bench/bench_backends.py [--weights standin] [--rounds 3] [--iters 5] [--threads 0]
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

import argparse
import copy
import os
import platform
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlguide_core.errors import DlguideError  # noqa: E402
from dlguide_core.inference import names  # noqa: E402
from dlguide_core.inference.backend_base import BackendOptions, sample_batch  # noqa: E402
from dlguide_core.inference.benchmark import agreement, time_runs  # noqa: E402
from dlguide_core.inference.registry import prepare_backend  # noqa: E402
from dlguide_core.vision.models import load_model  # noqa: E402


def measure(backends: dict, batch: torch.Tensor, rounds: int, iters: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in backends}
    for round_index in range(rounds):
        for name, backend in backends.items():
            warmup = 2 if round_index == 0 else 1
            times[name] += time_runs(lambda b=backend: b.run(batch), warmup=warmup, iters=iters)
    return times


def standin_weights() -> str:
    """imagenet when cached, else a TORCH_HOME holding the stand-in weights (a real softmax spread,
    so int8 agreement means something; latency does not depend on the values). Returns a label."""
    from dlguide_core.vision.models import imagenet_weights_path
    from tests.support.standin_weights import standin_imagenet_state

    if imagenet_weights_path().is_file():
        return "ImageNet weights"
    home = Path(os.environ.get("TMPDIR", "/tmp")) / "dlguide_bench_torch_home"
    (home / "hub" / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(standin_imagenet_state(), home / "hub" / "checkpoints" / imagenet_weights_path().name)
    os.environ["TORCH_HOME"] = str(home)
    return "stand-in random weights (ImageNet's are not cached here)"


def holdout_agreement(paths: dict, loaded, folder: Path, limit: int = 64) -> dict[str, dict[str, float]]:
    """Agreement with the guide's eager path on images the int8 calibration never saw."""
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.presets import preprocess

    files = sorted(folder.glob("*.JPEG"))[:limit]
    batch = preprocess([load_image(f) for f in files], loaded.preset)
    reference = paths["guide eager"].run(batch)
    return {name: agreement(reference, path.run(batch)) for name, path in paths.items()}


HOLDOUT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tiny-imagenet-10" / "val" / "images"


class GuideEager:
    """PyTorch eager exactly as the guide runs it: NCHW (contiguous) tensors, torch.no_grad."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = copy.deepcopy(model).to(memory_format=torch.contiguous_format)

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.model(batch.contiguous())


def migraphx_paths(loaded, size: int, precisions: list[str], notes: list[str]) -> dict:
    """MIGraphX compiled for `size` at each precision (compile timed), then prepared again as a second start
    would (gpu target: the saved .mxr loaded, timed; cpu target: compiled again, issue 26): that second
    start is what is benchmarked, as `bench` and the app run it. Empty where MIGraphX does not load."""
    from dlguide_core.inference.backend_migraphx import MigraphxBackend

    out = {}
    for precision in precisions:
        options = BackendOptions(precision=precision)
        status = MigraphxBackend.availability(options)
        if not status.available:
            notes.append(f"- {status.title} {precision}: {status.reason}")
            continue
        try:
            first = prepare_backend(names.MIGRAPHX, loaded, batch_size=size, options=options)
        except DlguideError as exc:  # e.g. a precision that gives wrong answers for this model
            notes.append(f"- {status.title} {precision}, batch {size}: refused: {exc}")
            continue
        again = prepare_backend(names.MIGRAPHX, loaded, batch_size=size, options=options)
        info, loaded_info = first.describe(), again.describe()
        compile_s = info.compile_s if info.compile_s is not None else info.saved_compile_s
        mib = Path(loaded_info.mxr).stat().st_size / 2**20
        second = (f".mxr load {loaded_info.load_s:.2f} s" if loaded_info.load_s is not None
                  else f"second start compiles again ({loaded_info.compile_s:.1f} s)")
        notes.append(f"- {again.label} {precision}, batch {size}: compile {compile_s:.1f} s"
                     f"{'' if info.compile_s is not None else ' (earlier run)'}, {second} ({mib:.0f} MiB)")
        out[f"{again.label} {precision}"] = again
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    label = standin_weights() if args.weights == "standin" else args.weights
    loaded = load_model("imagenet" if args.weights == "standin" else args.weights, device="cpu")
    options = BackendOptions(target="cpu", intra_op_threads=args.threads, graph_optimization=args.graph_optimization)
    paths = {"guide eager": GuideEager(loaded.model), "dlguide eager": prepare_backend(names.TORCH, loaded),
             "ORT fp32": prepare_backend(names.ONNXRUNTIME, loaded, options=options),
             "ORT int8": prepare_backend(names.ONNXRUNTIME, loaded, options=replace(options, precision="int8"))}
    ort = paths["ORT fp32"]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), ORT {ort.provider}, graph opt {args.graph_optimization}, "
          f"intra-op threads {args.threads or 'default'}; weights: {label}; "
          f"load average {os.getloadavg()[0]:.1f} (other processes share these cores)")
    print(f"# ONNX export {ort.export.export_s:.1f} s ({'cached' if ort.export.cached else 'fresh'}), "
          f"ORT session {ort.setup_s:.2f} s, int8 quantise+session {paths['ORT int8'].setup_s:.2f} s; "
          f"{args.rounds} rounds x {args.iters} runs per path\n")
    print("| batch | path | p50 ms | speed-up vs guide eager | max abs diff / max abs logit | top-1 agree "
          "| top-5 agree |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    compiled = []
    for size in (int(s) for s in args.batch_sizes.split(",")):
        batch = sample_batch(loaded, size)  # (size, 3, 299, 299)
        reference = paths["guide eager"].run(batch)
        scale = float(reference.abs().max())
        sized = {**paths, **migraphx_paths(loaded, size, [p for p in args.migraphx.split(",") if p], compiled)}
        times = measure(sized, batch, args.rounds, args.iters)
        base = float(np.percentile(times["guide eager"], 50))
        for name, path in sized.items():
            agree = agreement(reference, path.run(batch))
            p50 = float(np.percentile(times[name], 50))
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


if __name__ == "__main__":
    main()
