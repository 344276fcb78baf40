"""Benchmarks of the training jobs (issue 3), on the job store of DLGUIDE_HOME (SQLite):

    .venv/bin/python -m bench.bench_training [--quick]

1. streaming overhead: per-step time with the StoreSink over a NullSink (same run, interleaved)
2. latency from the end of a step to its row being readable by another process (p50/p95)
3. images/s of our loop over the guide's loop, identical settings (cifar_net, batch 4, SGD 0.001/0.9, 2 workers)
4. the Train page's live-view redraw at 100,000 stored steps

Our loop against the guide's: the guide's loop is transcribed from its CIFAR-10 section: a fresh
DataLoader(shuffle=True, num_workers=2) iterated each epoch, zero_grad / forward / backward / step, `running_loss +=
loss.item()` and a print every 2000 mini-batches. Ours is `training.loop.fit` with a NullSink.

bench/bench_store_backends.py runs 1, 2 and 4 (tests/support/training_timing.py) on PostgreSQL beside SQLite.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from bench.common import parser, report, result
from dlguide_core.data.image_folders import load_data
from dlguide_core.training.loop import build_run, fit
from dlguide_core.training.recipes import get_recipe
from dlguide_core.training.sinks import NullSink
from dlguide_core.vision.small_cnn import CifarNet
from tests.support.toy_data import write_toy_dataset
from tests.support.training_timing import readable_latency, redraw, streaming_overhead

EPOCHS, WORKERS, BATCH = 2, 2, 4


def guide_loop(data: Path) -> float:
    """Images/s of the guide's loop (training only, as in the guide)."""
    torch.manual_seed(0)
    bundle = load_data("cifar_net", data)
    trainloader = DataLoader(bundle.train, batch_size=BATCH, shuffle=True, num_workers=WORKERS)
    net = CifarNet(len(bundle.class_names))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    images, start = 0, time.perf_counter()
    for epoch in range(EPOCHS):
        running_loss = 0.0
        for i, data_ in enumerate(trainloader, 0):
            inputs, labels = data_
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            images += len(inputs)
            if i % 2000 == 1999:
                print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 2000:.3f}")
                running_loss = 0.0
    return images / (time.perf_counter() - start)


class CountingSink(NullSink):
    def __init__(self) -> None:
        self.images = 0

    def on_step(self, step, epoch, loss, lr, images_per_s, **extra) -> None:
        self.images += BATCH


def our_loop(data: Path) -> float:
    """Images/s of training.loop.fit (training only: validation time is subtracted via the sink)."""
    cfg = get_recipe("cifar_net").make_config(data=str(data), epochs=EPOCHS, workers=WORKERS, device="cpu")
    run = build_run(cfg, "cifar_net")
    original_eval = run.val_loader
    run.val_loader = DataLoader([], batch_size=1)  # the guide validates after training; time training only
    sink = CountingSink()
    start = time.perf_counter()
    fit(run, sink, None)
    run.val_loader = original_eval
    return sink.images / (time.perf_counter() - start)


def compare_loops(data: Path, rounds: int) -> float:
    ratios = []
    for _ in range(rounds):
        guide = guide_loop(data)
        ours = our_loop(data)
        ratios.append(ours / guide)
        print(f"  guide {guide:.0f} img/s, ours {ours:.0f} img/s -> {ratios[-1]:.3f}")
    print(f"training images/s ours/guide: median {statistics.median(ratios):.3f} over {rounds} rounds")
    return statistics.median(ratios)


def main() -> None:
    options = parser(__doc__)
    args = options.parse_args()
    os.environ.setdefault("DLGUIDE_HOME", tempfile.mkdtemp(prefix="bench-home-"))
    print(f"torch {torch.__version__}, {os.cpu_count()} CPU cores, threads {torch.get_num_threads()}, "
          f"cuda {torch.cuda.is_available()}")
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_dataset(Path(tmp) / "toy", classes=10, per_class=10 if args.quick else 100,
                                 val_per_class=2)
        streaming_overhead(data, 1 if args.quick else 6)
        readable_latency(20 if args.quick else 300, 0.02)
        ratio = compare_loops(data, 1 if args.quick else 5)
        steps = 2_000 if args.quick else 100_000
        view = {"pytorch_style": redraw(steps), "tensorflow_style": redraw(steps, tensorflow=True)}
    report(result("bench_training", {"loop_images_per_s_ours_over_guide": ratio, "live_view_steps": steps,
                                     "live_view": view}), args.json)


if __name__ == "__main__":
    main()
