"""`bench --weights W --backends torch,onnxruntime[,migraphx] --batch-sizes 1,8 --iters N --json`.

MIGraphX rows name their target in `provider` (migraphx:cpu, migraphx:gpu; "MIGraphX (CPU)" in the
table); a precision or target the installed MIGraphX refuses is that row's one-line `error`.
Prints a JSON list of rows {backend, provider, batch_size, p50_ms, p95_ms, images_per_s,
max_abs_diff, top1_agree, top5_agree, setup_s, disturbed}; a backend that cannot run here gets a row
with `error` saying why. `disturbed` says what else ran on this machine while the row was measured
("1 running job": the job store's jobs here; "other processes: 1.4 of 2 cores": the machine's load from
/proc/stat, less this process's own), null when nothing did: such a latency is not the backend's own.
The table (without --json) adds each row's speed-up over the torch row.

Exit codes:
  0  every backend that is available here ran; an unavailable one (module, execution provider
     or GPU missing) only gets its `error` row, so `--backends torch,onnxruntime,migraphx` is
     fine on a machine without MIGraphX
  1  an available backend failed while preparing or running, or no backend produced numbers
  2  usage errors (bad flags, unreadable checkpoint)
  3  `--weights imagenet` offline with no cached file
"""

from __future__ import annotations

import argparse
import json

from dlguide_core.cli.common import EXIT_FAILED, EXIT_OK, positive_int
from dlguide_core.inference.specs import NAMES as BACKENDS  # torch-free: `--help` stays light
from dlguide_core.inference.specs import ONNXRUNTIME, PRECISIONS, TARGETS, TORCH
from dlguide_core.vision.architectures import weights_help


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in BACKENDS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown backend(s) {', '.join(unknown) or '(none)'}; "
                                         f"choose from {', '.join(BACKENDS)}")
    return names


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must be integers, like 1,8,32 (got {text!r})") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("batch sizes must be at least 1")
    return sizes


def register(subparsers: argparse._SubParsersAction) -> None:
    help_text = f"latency and agreement of {' / '.join(BACKENDS)} vs eager"
    p = subparsers.add_parser("bench", help=help_text, description=f"{help_text}.",
                              epilog="".join((__doc__ or "").partition("Exit codes:")[1:]),  # -OO drops docstrings
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default="imagenet", help=weights_help())
    p.add_argument("--backends", type=_names, default=(TORCH, ONNXRUNTIME), metavar="A,B",
                   help=f"comma-separated, from {', '.join(BACKENDS)} (default {TORCH},{ONNXRUNTIME})")
    p.add_argument("--batch-sizes", type=_sizes, default=(1, 8, 32), metavar="1,8,32")
    p.add_argument("--iters", type=positive_int, default=20, help="timed runs per batch size (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (default 3)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="compiled backends' precision")
    p.add_argument("--target", choices=TARGETS, default="auto", help="gpu, cpu, or auto (GPU when present)")
    p.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: its default)")
    p.add_argument("--exhaustive-tune", action="store_true", help="MIGraphX exhaustive kernel tuning")
    p.add_argument("--mxr", metavar="PATH", help="MIGraphX: a .mxr compiled outside dlguide (migraphx-driver compile "
                   "--onnx <export> --binary --output m.mxr) to load instead of compiling; checked against the "
                   "weights, then kept in the .mxr cache")
    p.add_argument("--torch-compile", nargs="?", const="inductor", default=None, metavar="BACKEND",
                   help="run the torch row through torch.compile (backend inductor unless named)")
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlguide_core.inference.activity import watcher
    from dlguide_core.inference.backend_base import BackendOptions
    from dlguide_core.inference.benchmark import BenchConfig, rows_to_json, run_benchmark, run_failed
    from dlguide_core.jobs.running_here import running_jobs_here
    from dlguide_core.vision.models import load_model

    options = BackendOptions(precision=args.precision, target=args.target, intra_op_threads=args.threads,
                             exhaustive_tune=args.exhaustive_tune, torch_compile=args.torch_compile, mxr=args.mxr)
    config = BenchConfig(backends=args.backends, batch_sizes=args.batch_sizes, iters=args.iters,
                         warmup=max(0, args.warmup), options=options)
    loaded = load_model(args.weights)
    rows = run_benchmark(loaded, config, watch=watcher(running_jobs_here))  # each row: what ran beside it
    if args.json:
        print(json.dumps(rows_to_json(rows), indent=2))
    else:
        print(f"{loaded.label} · {loaded.arch} · {args.iters} runs after {args.warmup} warm-up")
        _print_table(rows)
    return EXIT_FAILED if run_failed(rows) else EXIT_OK


def _print_table(rows: list) -> None:
    from dlguide_core.inference.benchmark import speedups
    from dlguide_core.inference.registry import backend_label

    ratio = speedups(rows)
    print(f"{'backend':12} {'runtime':16} {'provider':28} {'batch':>5} {'p50 ms':>9} {'p95 ms':>9} {'img/s':>8} "
          f"{'max|diff|':>10} {'top1':>5} {'top5':>5} {'setup s':>8} {'x torch':>8} disturbed")
    for r in rows:
        if r.error:
            print(f"{r.backend:12} {'UNAVAILABLE' if r.unavailable else 'ERROR'} {r.error}")
            continue
        speedup = ratio.get((r.backend, r.batch_size))
        print(f"{r.backend:12} {backend_label(r.backend, r.provider):16} {r.provider:28.28} {r.batch_size:5d} "
              f"{r.p50_ms:9.2f} {r.p95_ms:9.2f} {r.images_per_s:8.1f} {r.max_abs_diff:10.2e} {r.top1_agree:5.2f} "
              f"{r.top5_agree:5.2f} {r.setup_s:8.2f} {f'{speedup:.2f}x' if speedup else '-':>8} {r.disturbed or '-'}")
