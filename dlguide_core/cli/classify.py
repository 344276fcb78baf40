"""`classify IMG [IMG ...] --weights {imagenet,none,PATH} --top K [--json]`."""

from __future__ import annotations

import argparse
import json
import sys

from dlguide_core.classify import classify_sources
from dlguide_core.models import load_model


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("classify", help="top-k Inception v3 predictions for image files")
    p.add_argument("images", nargs="+", metavar="IMG")
    p.add_argument("--weights", default="imagenet", help="imagenet, none, or a dlguide checkpoint PATH")
    p.add_argument("--top", type=_positive, default=5, metavar="K")
    p.add_argument("--batch-size", type=_positive, default=32)
    p.add_argument("--device", default=None, help="torch device (default: best available)")
    p.add_argument("--json", action="store_true", help="print a JSON list, one entry per image")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_model(args.weights, device=args.device, progress=_progress if sys.stderr.isatty() else None)
    if not loaded.trained:
        print(f"warning: weights are {loaded.label}; predictions are meaningless", file=sys.stderr)
    results = classify_sources(loaded, [(path, path) for path in args.images], k=args.top,
                               batch_size=args.batch_size)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        for r in results:
            if r.error:
                print(f"{r.image}: ERROR {r.error}")
                continue
            print(r.image)
            for p in r.top:
                print(f"  {p.prob:8.4f}  {p.label} ({p.index})")
    return 1 if any(r.error for r in results) else 0


def _progress(done: int, total: int) -> None:
    pct = f"{100 * done / total:5.1f}%" if total else f"{done / 2**20:.1f} MiB"
    print(f"\rdownloading weights {pct}", end="", file=sys.stderr, flush=True)
