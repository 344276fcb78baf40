"""`export --weights {imagenet,none,PATH} --out FILE.onnx [--json]`: ONNX with a dynamic batch and labels inside."""

from __future__ import annotations

import argparse
import json
import sys

from dlguide_core.vision.architectures import weights_help

EXPORTERS = ("dynamo", "torchscript")  # inference.export's (tests/cli/test_startup.py checks); it imports torch


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a model to ONNX (dynamic batch; class names and preset in "
                                             "its metadata), cached by weights hash")
    p.add_argument("--weights", default="imagenet", help=weights_help())
    p.add_argument("--out", required=True, metavar="FILE.onnx", help="where to write the ONNX file")
    p.add_argument("--exporter", choices=EXPORTERS, default="dynamo",
                   help="torch.onnx exporter: dynamo (torch.export, default) or the legacy torchscript one")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the exporter's)")
    p.add_argument("--force", action="store_true", help="re-export even if the weights hash is cached")
    p.add_argument("--json", action="store_true", help="print the export's description as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dlguide_core.cli.common import EXIT_USAGE
    from dlguide_core.inference.export import check_opset, export_onnx

    check_opset(args.exporter, args.opset)  # before loading any weights: OpsetError, exit 2
    if Path(args.out).is_dir():  # before loading any weights: a usage error, in one line
        print(f"error: --out {args.out} is a directory; name the .onnx file to write", file=sys.stderr)
        return EXIT_USAGE
    from dlguide_core.vision.models import load_model

    # Export from the CPU: the graph is device-independent and this avoids GPU-only kernels in tracing.
    loaded = load_model(args.weights, device="cpu")
    if not loaded.trained:
        print(f"warning: weights are {loaded.label}; the exported model's predictions are meaningless",
              file=sys.stderr)
    result = export_onnx(loaded, args.out, exporter=args.exporter, opset=args.opset, force=args.force)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    shape = "x".join(str(d) for d in result.input_shape)
    how = "from the cache" if result.cached else f"in {result.export_s:.1f} s"
    print(f"wrote {args.out}: input {result.input_name} [{shape}] -> output {result.output_name} "
          f"({len(result.class_names)} classes), opset {result.opset}, {result.exporter} exporter, {how}")
    return 0
