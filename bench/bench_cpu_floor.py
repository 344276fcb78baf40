"""Inception v3 on the CPU against this machine's compute floor: every CPU variant as a ratio, in one run.

    .venv/bin/python -m bench.bench_cpu_floor [--rounds 5] [--iters 3] [--inductor] [--agreement 500]

The floor is FLOPs per forward (counted by torch.utils.flop_counter.FlopCounterMode on the model
itself, batch 1, 299x299) over the machine's fp32 matmul peak (a large torch.mm and numpy matmul,
timed in the same rounds as the variants, so load from other processes hits both alike). Each
variant's p50 is the median over all rounds; "x floor" is p50 / floor. The variants, batch 1, fp32
unless named: eager NCHW (the guide), eager channels_last (dlguide), TorchScript frozen in
channels_last (traced here, in the bench process: the app never traces beside live inference),
torch.compile inductor (--inductor; minutes of C++ compilation), ONNX Runtime with each session
setting the ORT and PyTorch communities tune, ORT static int8 (QDQ), and MIGraphX (CPU) where it loads.
Then top-1 agreement of each approximate variant with eager on the bundled photos and, where present,
../shared/data's val photos (never used for int8 calibration). Prints Markdown.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bench.common import parser, report, result
from dlguide_core import onnxruntime_lib
from dlguide_core.inference.backend_base import BackendOptions, sample_batch
from dlguide_core.inference.benchmark import time_runs
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.threads import physical_cores
from dlguide_core.vision.models import load_model
from tests.support.cpu_paths import HOLDOUT, GuideEager, forward_flops, matmul_gflops, standin_weights

Run = Callable[[torch.Tensor], torch.Tensor]  # (B, 3, 299, 299) -> (B, 1000)


def ort_session(path: str, *, level: str = "all", intra: int = 0, inter: int = 0, parallel: bool = False,
                spinning: bool | None = None, mem_pattern: bool = True) -> Run:
    """An ONNX Runtime CPU session with the given settings, as a function of the batch."""
    ort = onnxruntime_lib.load()

    level_enum = ort.GraphOptimizationLevel
    levels = {"all": level_enum.ORT_ENABLE_ALL, "extended": level_enum.ORT_ENABLE_EXTENDED,
              "basic": level_enum.ORT_ENABLE_BASIC}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[level]
    so.intra_op_num_threads, so.inter_op_num_threads = intra, inter
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL if parallel else ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_mem_pattern = mem_pattern
    if spinning is not None:
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda batch: torch.from_numpy(session.run(None, {name: batch.numpy()})[0])


def torchscript_frozen(model: torch.nn.Module, batch: torch.Tensor) -> Run:
    """torch.jit.trace + freeze + optimize_for_inference in channels_last (oneDNN conv+bn+relu fusions)."""
    module = torch.jit.freeze(torch.jit.trace(model.eval(), batch.to(memory_format=torch.channels_last)))
    module = torch.jit.optimize_for_inference(module)

    def run(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return module(x.to(memory_format=torch.channels_last))
    return run


def build_variants(loaded, batch: torch.Tensor, inductor: bool, quick: bool = False) -> dict[str, Run]:
    """Every variant, each a function of the batch; "before" rows are the settings dlguide shipped until issue 26.
    `quick`: the two eager paths only (no trace, no ONNX export)."""
    if quick:
        return {"eager NCHW (the guide)": GuideEager(loaded.model).run,
                "eager channels_last (dlguide)": prepare_backend("torch", loaded).run}
    cores = physical_cores()
    ort = prepare_backend("onnxruntime", loaded, options=BackendOptions(target="cpu"))
    int8 = prepare_backend("onnxruntime", loaded, options=BackendOptions(target="cpu", precision="int8"))
    assert ort.export is not None  # ONNX Runtime runs an export
    fp32 = ort.export.path
    variants: dict[str, Run] = {
        "eager NCHW (the guide)": GuideEager(loaded.model).run,
        "eager channels_last (dlguide)": prepare_backend("torch", loaded).run,
        "TorchScript frozen, channels_last (bench only)": torchscript_frozen(loaded.model, batch),
        "ORT fp32 before (all, spinning, threads 0)": ort_session(fp32),
        "ORT fp32 dlguide backend (all, no spinning)": ort.run,
        f"ORT fp32 intra {cores} (physical cores), inter 1, no spinning": ort_session(fp32, intra=cores, inter=1,
                                                                                    spinning=False),
        "ORT fp32 parallel execution, inter 2, no spinning": ort_session(fp32, inter=2, parallel=True, spinning=False),
        "ORT fp32 no memory pattern, no spinning": ort_session(fp32, mem_pattern=False, spinning=False),
        "ORT fp32 level extended (no NCHWc layout), no spinning": ort_session(fp32, level="extended", spinning=False),
        "ORT int8 before (spinning)": ort_session(str(Path(fp32).with_name(Path(fp32).stem + ".int8.onnx"))),
        "ORT int8 dlguide backend (no spinning)": int8.run,
    }
    if inductor:
        compiled = torch.compile(loaded.model, backend="inductor")
        variants["torch.compile inductor (bench only)"] = lambda x: compiled(x)
    try:
        mgx = prepare_backend("migraphx", loaded, options=BackendOptions(target="cpu"))
        variants["MIGraphX (CPU) fp32, compiled in this process"] = mgx.run
    except Exception as exc:  # noqa: BLE001 - MIGraphX absent or refusing: reported, not fatal
        print(f"# MIGraphX (CPU) not measured: {exc}")
    return variants


def measure(variants: dict[str, Run], batch: torch.Tensor, rounds: int, iters: int) -> tuple[dict, list]:
    """Alternating rounds: every variant, then the matmul peak, each round; returns all times and peaks."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    peaks: list[dict[str, float]] = []
    with torch.no_grad():
        for round_index in range(rounds):
            for name, run in variants.items():
                times[name] += time_runs(partial(run, batch), warmup=2 if round_index == 0 else 1, iters=iters)
            peaks.append(matmul_gflops())
            print(f"# round {round_index + 1}/{rounds} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    return times, peaks


def agreement_photos(limit: int) -> list[Path]:
    from dlguide_core.vision.samples import bundled_samples

    val = sorted(HOLDOUT.glob("*.JPEG"))[:limit] if HOLDOUT.is_dir() else []
    return list(bundled_samples().values()) + val


DISTINCT = ("eager channels_last", "TorchScript", "torch.compile", "ORT fp32 dlguide", "ORT int8 dlguide")


def top1_agreement(variants: dict[str, Run], loaded, photos: list[Path], chunk: int = 16) -> dict[str, float]:
    """Top-1 agreement with eager NCHW for one variant per distinct model (session settings change no answer)."""
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.presets import preprocess

    variants = {name: run for name, run in variants.items() if name.startswith(DISTINCT)}
    same, guide = {name: 0 for name in variants}, GuideEager(loaded.model)
    for start in range(0, len(photos), chunk):
        batch = preprocess([load_image(p) for p in photos[start:start + chunk]], loaded.preset)
        with torch.no_grad():
            reference = guide.run(batch).argmax(1)
            for name, run in variants.items():
                same[name] += int((run(batch).argmax(1) == reference).sum())
    return {name: count / len(photos) for name, count in same.items()}


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=5)
    options.add_argument("--iters", type=int, default=3)
    options.add_argument("--inductor", action="store_true", help="add torch.compile inductor (slow to compile)")
    options.add_argument("--agreement", type=int, default=500, help="val photos for the agreement check (0: none)")
    args = options.parse_args()
    if args.quick:  # the eager paths, one round of one run, a small matmul; no agreement check
        args.rounds, args.iters, args.agreement = 1, 1, 0

    label = standin_weights()
    loaded = load_model("imagenet", device="cpu")
    batch = sample_batch(loaded, 1)  # (1, 3, 299, 299)
    flops = forward_flops(GuideEager(loaded.model).model, batch)
    variants = build_variants(loaded, batch, args.inductor, args.quick)
    times, peaks = measure(variants, batch, args.rounds, args.iters)
    peak = float(np.median([max(p.values()) for p in peaks]))  # the rounds' conditions, like the p50s
    best_peak = max(max(p.values()) for p in peaks)  # the quietest moment, like the best runs
    floor_ms, best_floor_ms = flops / (peak * 1e9) * 1000, flops / (best_peak * 1e9) * 1000
    print(f"\n# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs ({physical_cores()} physical), "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads); weights: {label}; load average "
          f"{os.getloadavg()[0]:.1f} (shared with other work)")
    print(f"# Inception v3: {flops / 1e9:.2f} GFLOP per forward (batch 1, 299x299, FlopCounterMode)")
    for name in peaks[0]:
        values = [p[name] for p in peaks]
        print(f"# {name} 2048^3 fp32: median {np.median(values):.0f} GFLOP/s, best {max(values):.0f}")
    print(f"# floor at the rounds' median peak ({peak:.0f} GFLOP/s) {floor_ms:.1f} ms; at the best peak "
          f"({best_peak:.0f} GFLOP/s) {best_floor_ms:.1f} ms; {args.rounds} rounds x {args.iters} runs per variant\n")
    print("| variant | p50 ms | p50 / median-peak floor | best ms | best / best-peak floor | p50 vs eager NCHW |")
    print("|---|---:|---:|---:|---:|---:|")
    base = float(np.median(times["eager NCHW (the guide)"]))
    for name, values in sorted(times.items(), key=lambda kv: np.median(kv[1])):
        p50, best = float(np.median(values)), float(min(values))
        print(f"| {name} | {p50:.1f} | {p50 / floor_ms:.2f}x | {best:.1f} | {best / best_floor_ms:.2f}x "
              f"| {base / p50:.2f}x |")
    if args.agreement:
        photos = agreement_photos(args.agreement)
        print(f"\nTop-1 agreement with eager NCHW on {len(photos)} photos (bundled + val; int8 calibrated on the "
              "bundled photos and their mirror images only):")
        for name, value in top1_agreement(variants, loaded, photos).items():
            print(f"- {name}: {value:.3f}")
    report(result("bench_cpu_floor", {"weights": label, "gflop_per_forward": flops / 1e9, "floor_ms": floor_ms,
                                      "p50_ms": {name: float(np.median(v)) for name, v in times.items()}}), args.json)


if __name__ == "__main__":
    main()
