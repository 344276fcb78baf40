"""`classify IMG [IMG ...] --weights {imagenet,none,PATH} --top K [--json]`.

--json prints one record per image, in order, always with the same keys (result_files.result_record): "image",
then "top" (a list of {"label", "index", "prob"}) or "error" (why the file could not be classified), then
"weights", "backend", "precision" and "latency_ms" (wall time per image; null in an error record: no forward ran
for it).
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from dlguide_core.cli.common import EXIT_FAILED, EXIT_OK, TerminalSafe, download_progress, positive_int
from dlguide_core.inference.specs import BASELINE
from dlguide_core.vision.architectures import weights_help


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("classify", help="top-k Inception v3 predictions for image files")
    p.add_argument("images", nargs="+", metavar="IMG")
    p.add_argument("--weights", default="imagenet", help=weights_help())
    p.add_argument("--top", type=positive_int, default=5, metavar="K")
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--device", default=None, help="torch device (default: best available)")
    p.add_argument("--json", action="store_true", help="print a JSON list, one entry per image")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlguide_core.vision.models import load_model
    from dlguide_core.vision.result_files import classify_timed, results_json

    loaded = load_model(args.weights, device=args.device, progress=download_progress("weights"))
    if not loaded.trained:
        print(f"warning: weights are {loaded.label}; predictions are meaningless", file=sys.stderr)
    results, run = classify_timed(loaded, [(path, path) for path in args.images], weights=args.weights,
                                  backend=BASELINE, k=args.top, batch_size=args.batch_size)  # eager PyTorch, fp32
    if args.json:
        print(results_json(results, run))
        return EXIT_FAILED if any(r.error for r in results) else EXIT_OK
    with contextlib.redirect_stdout(TerminalSafe(sys.stdout)):  # a checkpoint's class names, a file's name
        for r in results:
            if r.error:
                print(f"{r.image}: ERROR {r.error}")
                continue
            print(r.image)
            for p in r.top:
                print(f"  {p.prob:8.4f}  {p.label} ({p.index})")
    return EXIT_FAILED if any(r.error for r in results) else EXIT_OK
