"""`devices [--json]`: what PyTorch, ONNX Runtime, MIGraphX and TensorFlow see."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("devices", help="list accelerators and run the guide's install checks")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-tensorflow", action="store_true", help="skip the (slow) TensorFlow probe")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlguide_core import devices

    report = devices.collect(include_tensorflow=not args.no_tensorflow)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    print(f"torch {report.torch} ({report.backend}) · {devices.summary_label(report)}")
    for gpu in report.devices:
        print(f"  [{gpu.index}] {gpu.name}  {gpu.total_memory_bytes / 2**30:.1f} GiB")
    print(f"migraphx: {'yes' if report.migraphx else 'no'} ({report.migraphx_detail})")
    print(f"onnxruntime providers: {', '.join(report.onnxruntime_providers) or 'onnxruntime not installed'}")
    tf = report.tensorflow
    print("tensorflow: " + ("not installed" if tf is None else tf.get("error") or
                            f"{tf['version']} devices {[d['name'] for d in tf['devices']]}"))
    for check in report.checks:
        print(f"  [{'PASS' if check.passed else 'FAIL'}] {check.name}: {check.detail}")
    return 0
