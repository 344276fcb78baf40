"""Data-parallel scaling here: 1 vs 2 Gloo processes training the guide's models on the CPU.

Each configuration is a fresh process group (torch.multiprocessing spawn, Gloo,
dlguide_core.training.distributed's DDP wrapping) training on synthetic batches, so only the
compute and the gradient all-reduce are timed (no data loading). The per-device
batch stays fixed, as in the Ascend figures (weak scaling): the global batch grows
with the processes. Configurations alternate over rounds (bench.common.alternate); medians are reported.

    .venv/bin/python -m bench.bench_distributed [--arch cifar_net] [--batch 32] [--steps 30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench.common import alternate, parser, report, result
from dlguide_core.training import distributed as D
from dlguide_core.vision.models import build_model
from tests.support.ports import free_port

# (processes, torch threads per process): 1x1 and 2x1 use the same cores per process;
# 1x2 is what one process makes of both cores without DDP.
CONFIGS = ((1, 1), (2, 1), (1, 2))


def _model(arch: str) -> torch.nn.Module:
    return build_model(arch, num_classes=10)


def _worker(rank: int, world: int, threads: int, args: argparse.Namespace, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(threads)
    env, device = D.DistEnv.from_env(), torch.device("cpu")
    D.join_group(env, timeout_s=300)
    torch.manual_seed(rank)
    model = D.wrap_ddp(_model(args.arch), device) if world > 1 else _model(args.arch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    images = torch.randn(args.batch, 3, args.size, args.size)  # (B, 3, S, S)
    targets = torch.randint(0, 10, (args.batch,))
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
            start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(images), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        Path(out).write_text(json.dumps({"images_per_s": world * args.batch * args.steps / elapsed}))
    D.destroy_process_group()


def measure(world: int, threads: int, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.json")
        mp.spawn(_worker, args=(world, threads, args, free_port(), out), nprocs=world, join=True)
        return json.loads(Path(out).read_text())["images_per_s"]


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--arch", default="cifar_net", choices=("cifar_net", "inception_v3"))
    options.add_argument("--batch", type=int, default=32, help="per-process batch")
    options.add_argument("--size", type=int, default=None, help="image size (32 cifar_net, 75 inception_v3)")
    options.add_argument("--steps", type=int, default=30)
    options.add_argument("--warmup", type=int, default=5)
    options.add_argument("--rounds", type=int, default=2)
    args = options.parse_args()
    if args.quick:  # one round of 2 steps after 1 warm-up step
        args.steps, args.warmup, args.rounds, args.batch = 2, 1, 1, 8
    args.size = args.size or (32 if args.arch == "cifar_net" else 75)
    runs = alternate({f"{w}x{t}": functools.partial(measure, w, t, args) for w, t in CONFIGS}, args.rounds)
    median = {key: statistics.median(values) for key, values in runs.items()}
    figures = {"arch": args.arch, "per_process_batch": args.batch, "image_size": args.size, "steps": args.steps,
               "rounds": args.rounds, "images_per_s": median, "runs": runs,
               "speedup_2_vs_1": median["2x1"] / median["1x1"],
               "efficiency_2": median["2x1"] / (2 * median["1x1"]),
               "ddp_2x1_vs_one_process_2_threads": median["2x1"] / median["1x2"],
               "torch": torch.__version__}
    print(f"{args.arch} at {args.size}px, batch {args.batch} per process, {args.steps} timed steps, "
          f"median of {args.rounds}")
    for key, value in median.items():
        print(f"  {key} (processes x threads): {value:8.1f} images/s")
    print(f"  2 processes vs 1: speedup {figures['speedup_2_vs_1']:.2f}, efficiency {figures['efficiency_2']:.2f}; "
          f"vs one process on both cores: {figures['ddp_2x1_vs_one_process_2_threads']:.2f}")
    report(result("bench_distributed", figures), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
