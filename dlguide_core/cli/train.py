"""`train --recipe R --data DIR [...] [--detach] [--json]`: one training job through the store."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from dlguide_core import jobs
from dlguide_core.job_runner import run_job
from dlguide_core.recipes import ConfigError, get_recipe, recipes
from dlguide_core.sinks import ConsoleSink

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# CLI flag -> config field; None values keep the recipe's (the guide's) default.
FIELDS = ("epochs", "batch_size", "lr", "image_size", "max_steps", "weights", "workers", "device",
          "label_smoothing", "seed")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a recipe as a job (foreground by default)")
    p.add_argument("--recipe", required=True, choices=sorted(recipes()))
    p.add_argument("--data", required=True, metavar="DIR", help="dataset folder (see `prepare`)")
    p.add_argument("--epochs", type=int, metavar="N")
    p.add_argument("--batch-size", type=int, metavar="B")
    p.add_argument("--lr", type=float, metavar="LR")
    p.add_argument("--image-size", type=int, metavar="S", help="train crop size (CPU smoke runs)")
    p.add_argument("--max-steps", type=int, metavar="N", help="stop after N optimiser steps")
    p.add_argument("--weights", metavar="imagenet|none|PATH")
    p.add_argument("--workers", type=int, metavar="N", help="DataLoader worker processes")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"))
    p.add_argument("--amp", action="store_true", help="mixed precision on GPUs (bf16 autocast)")
    p.add_argument("--label-smoothing", type=float, metavar="X")
    p.add_argument("--seed", type=int, metavar="N")
    p.add_argument("--detach", action="store_true", help="queue the job and return at once")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace):
    overrides = {name: getattr(args, name) for name in FIELDS}
    overrides["data"] = str(Path(args.data).expanduser().resolve())
    if args.weights not in (None, "imagenet", "none"):
        overrides["weights"] = str(Path(args.weights).expanduser().resolve())
    if args.amp:
        overrides["amp"] = True
    return get_recipe(args.recipe).make_config(**overrides)


def run(args: argparse.Namespace) -> int:
    try:
        cfg = build_config(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(cfg.data).is_dir():
        print(f"error: {cfg.data} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    store = jobs.JobStore()
    if args.detach:
        job = jobs.submit(store, args.recipe, cfg)
        print(json.dumps({"job_id": job.id}) if args.json else f"job {job.id} {job.status}; "
              f"follow it with `python -m dlguide_core jobs show {job.id}`")
        return EXIT_OK
    job = jobs.submit(store, args.recipe, cfg, start=False)
    return run_foreground(store, job.id, args.json)


def run_foreground(store: jobs.JobStore, job_id: str, as_json: bool) -> int:
    """Run a queued job in this process (Ctrl-C cancels it with a checkpoint)."""
    store.claim(job_id, os.getpid())
    print(f"job {job_id}: log and checkpoint in {jobs.job_dir(job_id)}", file=sys.stderr)
    status = run_job(store, job_id, ConsoleSink(every=10))
    job = store.get(job_id, refresh=False)
    if as_json:
        print(json.dumps({"job_id": job_id, "status": status, "error": job.error, "checkpoint": job.checkpoint}))
    else:
        print(f"job {job_id} {status}" + (f": {job.error}" if job.error else "")
              + (f"; checkpoint {job.checkpoint}" if job.checkpoint else ""))
    return EXIT_OK if status == "succeeded" else EXIT_FAILED
