"""`prepare tiny-imagenet DIR [--download] [--json]`, `prepare cifar10 DIR [--download] [--json]`."""

from __future__ import annotations

import argparse
import json
import sys

from dlguide_core.cli.common import EXIT_FAILED, EXIT_OK, dataset_path, download_progress


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("prepare", help="download and lay out a training dataset")
    sub = p.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    tiny = sub.add_parser("tiny-imagenet", help="re-organise val/ by class (the guide's step); safe to re-run")
    cifar = sub.add_parser("cifar10", help="fetch CIFAR-10's python batches into DIR")
    for q in (tiny, cifar):
        q.add_argument("dir", metavar="DIR")
        q.add_argument("--download", action="store_true", help="download (checksum-verified) when missing")
        q.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlguide_core.data import cifar10, image_folders, tiny_imagenet  # torchvision: only when one is prepared

    target = dataset_path(args.dir)
    progress = download_progress("the dataset")
    if args.dataset == "cifar10":
        if args.download:
            cifar10.fetch_cifar10(target, progress)
        info = image_folders.detect(target)
        if info is None or info.kind != "cifar10":
            print(f"error: no {cifar10.CIFAR10_FOLDER} in {target}; add --download", file=sys.stderr)
            return EXIT_FAILED
        _emit(args.json, {"path": str(target), "dataset": "cifar10", "classes": len(info.classes)})
        return EXIT_OK
    if args.download and not (target / "train").is_dir():
        target = tiny_imagenet.fetch_tiny_imagenet(target.parent if target.name == "tiny-imagenet-200" else target,
                                                   progress)
    report = tiny_imagenet.prepare_tiny_imagenet(target)
    info = image_folders.detect(target)
    unreadable = image_folders.unreadable_files(info) if info is not None else None
    _emit(args.json, {"path": str(target), "dataset": "tiny-imagenet", "moved": report.moved,
                      "already_in_place": report.already_in_place, "total": report.total,
                      "classes": report.classes, "unreadable": unreadable.to_json() if unreadable else None})
    if unreadable and unreadable.count:  # said up front, not first in a training job's log
        print(f"warning: {unreadable.count} unreadable file(s) will be skipped by training (e.g. "
              f"{unreadable.examples[0]})", file=sys.stderr)
    return EXIT_OK


def _emit(as_json: bool, data: dict) -> None:
    if as_json:
        print(json.dumps(data))
        return
    if data["dataset"] == "cifar10":
        print(f"{data['path']}: CIFAR-10 ready ({data['classes']} classes)")
    else:
        print(f"{data['path']}: moved {data['moved']} val images, {data['already_in_place']} already in place "
              f"({data['total']} in {data['classes']} classes)")
