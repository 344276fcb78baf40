"""Inception v3 training images/s on a GPU (CUDA or ROCm): the guide's loop, ours in fp32, ours with AMP +
channels_last. The guide's recipe: 299 px crops, batch 32, SGD 0.1/0.9/1e-4, CrossEntropy.

    .venv/bin/python -m bench.bench_gpu_training --json results.json      # on the GPU machine

Two kinds of data, both generated here (no download):
- synthetic: a fixed (3, 299, 299) tensor per sample: the data path costs only the collate and the
  host-to-device copy, so this measures the model step itself;
- tiny-imagenet-shaped: an ImageFolder of 64x64 JPEGs in 200 class folders, decoded and augmented by
  the recipe's own train preset (RandomResizedCrop 299, flip, normalise) in DataLoader workers, as a
  fine-tuning run on tiny-imagenet-200 reads it.
Each variant trains `--warmup` untimed steps and then `--steps` timed ones (time between the sink's
step callbacks, so validation and start-up are excluded); variants run round-robin `--rounds` times and
the table reports medians and the ratio of each to the guide's loop, all from this one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset

from bench.common import parser, report, result, skip
from dlguide_core.data.image_folders import load_data
from dlguide_core.training.factories import EpochSampler, device_name
from dlguide_core.training.loop import build_run, fit
from dlguide_core.training.recipes import get_recipe
from dlguide_core.training.sinks import NullSink
from dlguide_core.vision.models import build_model

CLASSES, SIZE = 200, 299
ASCEND = {"Ascend 910 (Ascend ModelZoo)": 942.0, "V100 (Ascend ModelZoo)": 770.0}  # Inception v3 training img/s


class SyntheticImages(Dataset):
    """`length` samples of one fixed random image: no decode, no augmentation."""

    def __init__(self, length: int) -> None:
        self.image = torch.randn(3, SIZE, SIZE)  # (3, 299, 299)
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.image, index % CLASSES


def write_tiny_imagenet_shaped(root: Path, per_class: int) -> Path:
    """200 class folders of 64x64 JPEGs (smooth random colour fields, so JPEG sizes are photo-like)."""
    rng = np.random.default_rng(0)
    for split, count in (("train", per_class), ("val", 1)):
        for c in range(CLASSES):
            folder = root / split / f"n{c:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                small = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
                image = Image.fromarray(small).resize((64, 64), Image.Resampling.BILINEAR)
                image.save(folder / f"{i}.JPEG", quality=90)
    return root


class TimingSink(NullSink):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step(self, step, epoch, loss, lr, images_per_s, **extra) -> None:
        self.times.append(time.perf_counter())


def images_per_s(times: list[float], warmup: int, batch: int) -> float:
    timed = times[warmup - 1:]  # from the end of the last warm-up step to the end of the last timed one
    return batch * (len(timed) - 1) / (timed[-1] - timed[0])


def loader(dataset: Dataset, batch: int, workers: int, sampler=None) -> DataLoader:
    return DataLoader(dataset, batch_size=batch, sampler=sampler, shuffle=sampler is None, num_workers=workers,
                      pin_memory=True, persistent_workers=workers > 0, drop_last=True)


def guide_loop(data: Path | None, args: argparse.Namespace) -> float:
    """The guide's (torchvision reference) train_one_epoch: fp32, NCHW, cudnn.benchmark on."""
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    model = build_model("inception_v3", num_classes=CLASSES).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    if data is None:
        dataset = SyntheticImages(args.batch * (args.warmup + args.steps))
    else:
        dataset = load_data("inception_v3", data, SIZE).train  # the recipe's preset, as the guide's Compose
    times = []
    model.train()
    for image, target in loader(dataset, args.batch, args.workers):
        image, target = image.to(device, non_blocking=True), target.to(device, non_blocking=True)
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss.item()  # the guide's metric logger reads the loss every step
        times.append(time.perf_counter())
        if len(times) == args.warmup + args.steps:
            break
    return images_per_s(times, args.warmup, args.batch)


def our_loop(data: Path, synthetic: bool, args: argparse.Namespace, **fields) -> float:
    """training.loop.build_run + fit, exactly as a job runs it, with the fields of the variant."""
    cfg = get_recipe("inception_v3").make_config(data=str(data), weights="none", device=args.device, epochs=1,
                                                 batch_size=args.batch, workers=args.workers,
                                                 max_steps=args.warmup + args.steps, **fields)
    run = build_run(cfg, "inception_v3")
    if synthetic:
        dataset = SyntheticImages(args.batch * (args.warmup + args.steps))
        run.train_loader = loader(dataset, args.batch, args.workers, EpochSampler(len(dataset), cfg.seed))
    run.val_loader = DataLoader([], batch_size=1)  # time training only
    sink = TimingSink()
    fit(run, sink, None)
    return images_per_s(sink.times, args.warmup, args.batch)


VARIANTS = {
    "guide loop, fp32": lambda data, synthetic, args: guide_loop(None if synthetic else data, args),
    "ours, fp32": lambda data, synthetic, args: our_loop(data, synthetic, args),
    "ours, AMP bf16 + channels_last": lambda data, synthetic, args: our_loop(
        data, synthetic, args, amp=True, amp_dtype="bfloat16", channels_last=True),
    "ours, AMP fp16 + channels_last": lambda data, synthetic, args: our_loop(
        data, synthetic, args, amp=True, amp_dtype="float16", channels_last=True),
}


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--batch", type=int, default=32)
    options.add_argument("--warmup", type=int, default=15)
    options.add_argument("--steps", type=int, default=60)
    options.add_argument("--rounds", type=int, default=2)
    options.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    options.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                         help="cpu only to check this script (slowly: Inception v3 at 299 px)")
    args = options.parse_args()
    os.environ.setdefault("DLGUIDE_HOME", tempfile.mkdtemp(prefix="bench-home-"))
    if args.quick:
        if args.device == "cuda" and not torch.cuda.is_available():
            skip("no GPU visible to PyTorch: this benchmark measures GPU training (--device cpu checks it, slowly)")
        args.batch, args.warmup, args.steps, args.rounds, args.workers = 8, 1, 2, 1, 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU visible to PyTorch: this benchmark measures GPU training", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    print(f"{device_name(device)} · torch {torch.__version__} · batch {args.batch} · {SIZE} px · "
          f"{args.warmup} warm-up + {args.steps} timed steps · {args.workers} workers · {args.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        per_class = -(-args.batch * (args.warmup + args.steps) // CLASSES)
        data = write_tiny_imagenet_shaped(Path(tmp) / "tiny", per_class)
        results: dict[str, dict[str, list[float]]] = {"synthetic": {}, "tiny-imagenet-shaped": {}}
        for _ in range(args.rounds):
            for kind, synthetic in (("synthetic", True), ("tiny-imagenet-shaped", False)):
                for name, variant in VARIANTS.items():
                    value = variant(data, synthetic, args)
                    results[kind].setdefault(name, []).append(value)
                    print(f"  {kind:22s} {name:32s} {value:8.1f} img/s", flush=True)
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
    report(result("bench_gpu_training", summarise(results, args, device)), args.json)
    return 0


def summarise(results: dict, args: argparse.Namespace, device: torch.device) -> dict:
    figures: dict = {"device": device_name(device), "torch": torch.__version__, "batch": args.batch,
                     "image_size": SIZE, "rounds": args.rounds, "steps": args.steps, "results": {}}
    print(f"\n| data | variant | images/s (median) | / guide loop | / Ascend 910 ({ASCEND_910:.0f}) | "
          f"/ V100 ({ASCEND_V100:.0f}) |\n|---|---|---|---|---|---|")
    for kind, variants in results.items():
        guide = statistics.median(variants["guide loop, fp32"])
        for name, values in variants.items():
            value = statistics.median(values)
            figures["results"][f"{kind} · {name}"] = {"images_per_s": value, "vs_guide": value / guide,
                                                     "runs": values}
            print(f"| {kind} | {name} | {value:.0f} | {value / guide:.3f} | {value / ASCEND_910:.2f} | "
                  f"{value / ASCEND_V100:.2f} |")
    return figures


ASCEND_910, ASCEND_V100 = ASCEND.values()

if __name__ == "__main__":
    sys.exit(main())
