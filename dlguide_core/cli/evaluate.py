"""`evaluate --weights {imagenet,PATH} --data DIR [--split val] [--batch-size B] [--limit N] [--json] [--detach]`.

`--detach` queues it as a job of the store (dlguide_core.jobs.evaluation_job) and prints its id; `jobs show ID
--json` then holds the same payload under `evaluation` once it finishes.

torch is imported inside `run` only: `python -m dlguide_core --help` stays light.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dlguide_core.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    TerminalSafe,
    add_field_flags,
    dataset_path,
    download_progress,
    positive_int,
)
from dlguide_core.jobs.evaluation_job import EvaluateConfig
from dlguide_core.training.fields import device_problem

if TYPE_CHECKING:  # the evaluation module imports torch: loaded only when an evaluation runs
    from dlguide_core.evaluation import EvaluationJson


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("evaluate", help="top-1/top-5, per-class accuracy and the confusion matrix on a split")
    # The flags are generated from EvaluateConfig's field declarations (dlguide_core/jobs/evaluation_job.py).
    add_field_flags(p, EvaluateConfig, ("weights", "data"), required=True)
    add_field_flags(p, EvaluateConfig, ("split",), field_default=True)
    add_field_flags(p, EvaluateConfig, ("batch_size", "limit"), field_default=True, type=positive_int)
    add_field_flags(p, EvaluateConfig, ("device",))  # left out: the best device available (the job's: auto)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--detach", action="store_true",
                   help="queue it as a background job and return at once (result: `jobs show ID`)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.weights == "none":
        print("error: --weights none scores a random model; give imagenet or a checkpoint PATH", file=sys.stderr)
        return EXIT_USAGE
    if Path(args.split).name != args.split or args.split in (".", ".."):
        print(f"error: --split must be a folder name under DIR (val, test...), not {args.split!r}", file=sys.stderr)
        return EXIT_USAGE
    data = dataset_path(args.data)  # symlinks resolved; inside DLGUIDE_DATA_ROOTS when set (else exit 2)
    dataset_path(str(data / args.split))  # a split symlinked out of the roots is refused the same way
    if not data.is_dir():
        print(f"error: {args.data} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    args.data = str(data)
    if args.device is not None and (problem := device_problem(args.device)):  # the one device rule, inline too
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.detach:
        return _detach(args)
    from dlguide_core.evaluation import EvaluationError, evaluate_model
    from dlguide_core.vision.models import load_model

    loaded = load_model(args.weights, device=args.device, progress=download_progress("weights"))
    try:
        result = evaluate_model(loaded, args.data, split=args.split, batch_size=args.batch_size, limit=args.limit,
                                progress=_progress_line() if not args.json else None)
    except EvaluationError as exc:  # the model and the data do not fit: a usage error
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    payload = result.to_json()
    if args.json:
        print(json.dumps(payload, indent=2))
        return EXIT_OK
    with contextlib.redirect_stdout(TerminalSafe(sys.stdout)):  # class names come from folders and checkpoints
        _print_text(payload)
    return EXIT_OK


def _detach(args: argparse.Namespace) -> int:
    from dlguide_core.errors import DlguideError
    from dlguide_core.jobs import queue
    from dlguide_core.jobs.evaluation_job import EVALUATE_RECIPE
    from dlguide_core.jobs.store import open_store

    if not (Path(args.data) / args.split).is_dir():
        print(f"error: {args.data} has no {args.split}/ folder of class folders", file=sys.stderr)
        return EXIT_USAGE
    from dlguide_core.vision.architectures import IMAGENET, parse_source

    named = parse_source(args.weights)  # imagenet or ARCH:imagenet stay names; a path is made absolute
    pretrained = named is not None and named[1] == IMAGENET
    weights = args.weights if pretrained else str(Path(args.weights).expanduser().resolve())
    try:  # paths made absolute: the job process runs elsewhere
        if named is None:  # a checkpoint file: missing or foreign is refused now, not in the job
            from dlguide_core.vision.checkpoints import load_checkpoint

            load_checkpoint(weights)
        cfg = EvaluateConfig(weights=weights, data=str(Path(args.data).resolve()), split=args.split,
                             batch_size=args.batch_size, limit=args.limit, device=args.device or "auto")
        job = queue.submit(open_store(), EVALUATE_RECIPE, cfg)
    except DlguideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps({"job_id": job.id}) if args.json else f"job {job.id} {job.status}; "
          f"follow it with `python -m dlguide_core jobs show {job.id}`")
    return EXIT_OK


def _progress_line() -> Callable[[int, int], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        print(f"\revaluating {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)

    return show


def _print_text(data: EvaluationJson) -> None:
    print(f"{data['weights']} on {data['data']}/{data['split']}: {data['images']} images, "
          f"{data['images_per_s']:.1f} images/s")
    if data["note"]:
        print(f"  {data['note']}")
    print(f"  top-1 {data['top1']:.2f} %  top-5 {data['top5']:.2f} %  loss {data['loss']:.4f}")
    labels = dict(zip(data["confusion"]["classes"], data["confusion"]["labels"]))
    width = max((len(labels[c]) for c in data["per_class"]), default=0)
    for cls, accuracy in data["per_class"].items():
        print(f"    {labels[cls]:<{width}}  {accuracy:5.1f} %")
    for row in data["top_confusions"][:5]:
        print(f"  confused: {row['true']} -> {row['predicted']} ({row['count']}x, {row['percent']:.1f} %)")
