"""Does writing TensorBoard event files slow a training step? The job's sinks with and without
TensorBoardSink, interleaved rounds in one process, on the real loop (`training.loop.fit`).

The smallest step there is (cifar_net, batch 4: about a millisecond on a CPU) is the worst case
for any per-step cost, so that is what is timed. Step time = median interval between on_step
calls (epoch ends, which validate, drop out of the median). The box is shared and its load moves
by 5x within a minute, so rounds are short (about a second) and many, with the two variants
alternating, and the result is the median of the paired ratios. The sink flushes every 0.25 s
here (jobs: every 2 s), so its writes land inside the timed steps, a harsher case than a job.

`.venv/bin/python -m bench.bench_tensorboard [--rounds 20] [--images 600] [--batch-size 4]`
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import alternate, parser, report, result
from dlguide_core.jobs.store import JobStore, db_path
from dlguide_core.jobs.store_sink import StoreSink
from dlguide_core.jobs.tensorboard_export import job_sink
from dlguide_core.training.loop import build_run, fit
from dlguide_core.training.recipes import get_recipe
from dlguide_core.training.sinks import NullSink, TeeSink
from tests.support.toy_data import write_toy_dataset


class StepClock(NullSink):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step(self, step, epoch, loss, lr, images_per_s, **extra) -> None:
        self.times.append(time.perf_counter())

    def median_step_s(self) -> float:
        return statistics.median(b - a for a, b in zip(self.times, self.times[1:]))


def one_round(data: Path, store: JobStore, batch_size: int, with_tensorboard: bool, logdir: Path) -> float:
    cfg = get_recipe("cifar_net").make_config(data=str(data), epochs=1, workers=0, device="cpu",
                                              batch_size=batch_size)
    job = store.create("cifar_net", "pytorch", {})
    store_sink, clock = StoreSink(store.url, job.id), StepClock()
    sinks = [store_sink, clock]
    tensorboard = job_sink(store.url, job.id, logdir / job.id, flush_s=0.25) if with_tensorboard else None
    if tensorboard:
        sinks.insert(1, tensorboard)
    fit(build_run(cfg, "cifar_net"), TeeSink(*sinks), None)
    if tensorboard:
        tensorboard.close()
        assert tensorboard.failed is None and any((logdir / job.id).glob("events.out.tfevents.*"))
    store_sink.close()
    return clock.median_step_s()


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=20)
    options.add_argument("--images", type=int, default=600, help="training images (toy data, 32x32)")
    options.add_argument("--batch-size", type=int, default=4)
    args = options.parse_args()
    if args.quick:
        args.rounds, args.images = 2, 80
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        data = write_toy_dataset(tmp / "toy", classes=4, per_class=args.images // 4, val_per_class=4)
        store = JobStore(db_path(tmp))
        one_round(data, store, args.batch_size, True, tmp / "tb")  # warm-up: imports, allocator, caches
        def tell(r: int, times: dict[str, list[float]]) -> None:
            print(f"round {r + 1}: step without {1e3 * times['without'][r]:.3f} ms, with TensorBoard "
                  f"{1e3 * times['with'][r]:.3f} ms -> {times['with'][r] / times['without'][r]:.3f}")

        times = alternate({name: functools.partial(one_round, data, store, args.batch_size, name == "with",
                                                   tmp / "tb") for name in ("without", "with")},
                          args.rounds, on_round=tell)
        pairs = list(zip(times["without"], times["with"]))
        ratios = [b / a for a, b in pairs]
        print(f"step time with/without TensorBoard: median ratio {statistics.median(ratios):.3f} "
              f"over {args.rounds} rounds (batch {args.batch_size}, {args.images} images, 1 epoch per run)")
        fastest = min(min(p) for p in pairs)  # quiet rounds: neither variant slowed by the neighbours
        quiet = [b / a for a, b in pairs if max(a, b) < 1.5 * fastest]
        if quiet:
            print(f"quiet rounds only (both steps within 1.5x of the fastest): median ratio "
                  f"{statistics.median(quiet):.3f} over {len(quiet)} rounds")
        report(result("bench_tensorboard", {"median_ratio_with_over_without": statistics.median(ratios),
                                            "rounds": args.rounds, "batch_size": args.batch_size}), args.json)


if __name__ == "__main__":
    main()
