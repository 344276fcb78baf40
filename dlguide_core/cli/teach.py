"""`teach NAME=DIR [NAME=DIR ...] --weights W --out FILE [--json]`: teach the model new names from a few photos each
(issue 44; dlguide_core.teach) and write a dlguide checkpoint that answers them beside the model's own classes.

Each DIR's images (jpg, png, bmp, webp, gif; subfolders too) are that name's photos: at least 2 names with at least
3 photos each. The checkpoint loads wherever weights are taken: `classify --weights FILE`, `evaluate`, the Classify
page, the booth (DLGUIDE_KIOSK_WEIGHTS). --json prints one record: "out", "names" ({NAME: photos}), "examples",
"train_ms", "loss" (one value per step) and "weights". Exit 0 written, 2 usage (a bad NAME=DIR, too few photos),
3 the weights are not available offline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dlguide_core.cli.common import EXIT_OK
from dlguide_core.errors import UsageError
from dlguide_core.vision.architectures import weights_help


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("teach", help="teach new names from a few photos each; writes a checkpoint")
    p.add_argument("taught", nargs="+", metavar="NAME=DIR", help="a name and the folder of its photos")
    p.add_argument("--weights", default="imagenet", help=weights_help())
    p.add_argument("--out", required=True, metavar="FILE", help="the checkpoint to write (.pt)")
    p.add_argument("--device", default=None, help="torch device (default: best available)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def parse_pairs(pairs: list[str]) -> dict[str, list[Path]]:
    """NAME=DIR arguments -> name -> its image files; UsageError (one line) for a bad pair."""
    from dlguide_core.data.image_folders import IMAGE_SUFFIXES
    from dlguide_core.teach import check_name

    photos: dict[str, list[Path]] = {}
    for pair in pairs:
        raw, sep, folder = pair.partition("=")
        if not sep or not folder:
            raise UsageError(f"{pair!r}: write NAME=DIR (a name, =, the folder of its photos)")
        name = check_name(raw)
        if name in photos:
            raise UsageError(f"{name} is named twice")
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise UsageError(f"{name}: {folder} is not a folder")
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        photos[name] = files
    return photos


def run(args: argparse.Namespace) -> int:
    from dlguide_core import teach
    from dlguide_core.cli.common import download_progress
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.models import load_model

    files = parse_pairs(args.taught)
    teach.check_enough({name: len(paths) for name, paths in files.items()})
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a folder; name the checkpoint file to write")
    loaded = load_model(args.weights, device=args.device, progress=download_progress("weights"))
    if not loaded.trained:
        print(f"warning: weights are {loaded.label}; the model's own classes are meaningless", file=sys.stderr)
    images = {name: [load_image(p, min_side=loaded.preset.resize) for p in paths] for name, paths in files.items()}
    head = teach.teach_images(loaded, images)
    teach.save_taught_checkpoint(loaded, head, out)
    counts = dict(zip(head.names, head.counts, strict=True))
    if args.json:
        print(json.dumps({"out": str(out), "names": counts, "examples": head.examples, "train_ms": head.train_ms,
                          "loss": list(head.loss), "weights": args.weights}))
    else:
        taught = ", ".join(f"{name} ({count})" for name, count in counts.items())
        print(f"wrote {out}: {loaded.label} + {len(head.names)} taught names: {taught}; "
              f"the head trained in {head.train_ms:.0f} ms (loss {head.loss[0]:.3f} -> {head.loss[-1]:.3f})")
    return EXIT_OK
