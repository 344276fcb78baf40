"""Inception v3 inference on a GPU: eager PyTorch, torch.compile, ONNX Runtime's GPU provider (and TensorRT's
where it loads), p50 latency and images/s at batch 1/8/32, all in one run, through the same backends the app
and `python -m dlguide_core bench` use (end to end: host batch in, host logits out).

    .venv/bin/python -m bench.bench_gpu_inference --json results.json    # on the GPU machine

Weights: a random Inception v3 whose classifier is rescaled on the bundled photos (tests/support/standin_weights.py),
so agreement with eager compares a real probability spread; speed does not depend on the values.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from bench.common import parser, report, result
from dlguide_core import onnxruntime_lib
from dlguide_core.inference.backend_base import BackendOptions
from dlguide_core.inference.benchmark import BenchConfig, run_benchmark
from dlguide_core.training.factories import device_name
from dlguide_core.vision.models import IMAGENET_FILENAME, load_model
from tests.support.standin_weights import standin_imagenet_state

ROWS = {
    "eager": ("torch", BackendOptions()),
    "torch.compile (inductor)": ("torch", BackendOptions(torch_compile="inductor")),
    "ONNX Runtime (GPU provider)": ("onnxruntime", BackendOptions(target="gpu")),
}


def standin_weights() -> None:
    """TORCH_HOME with the stand-in state under torchvision's file name (no download here)."""
    home = Path(tempfile.mkdtemp(prefix="torch-home-"))
    path = home / "hub" / "checkpoints" / IMAGENET_FILENAME
    path.parent.mkdir(parents=True)
    torch.save(standin_imagenet_state(), path)
    os.environ["TORCH_HOME"] = str(home)


def tensorrt_note() -> str:
    """Whether ONNX Runtime's TensorRT provider could run here (it needs TensorRT's own libraries)."""
    try:
        ort = onnxruntime_lib.load()
    except ImportError:
        return "onnxruntime not installed"
    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        return f"not in this onnxruntime build ({', '.join(ort.get_available_providers())})"
    import ctypes

    try:
        ctypes.CDLL("libnvinfer.so.10")
    except OSError as exc:
        return f"listed by onnxruntime {ort.__version__}, but TensorRT is not installed ({exc})"
    return "TensorRT libraries present"


def main() -> int:
    cli = parser(__doc__)
    cli.add_argument("--batch-sizes", default="1,8,32")
    cli.add_argument("--iters", type=int, default=50)
    cli.add_argument("--warmup", type=int, default=10)
    cli.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, from: {', '.join(ROWS)}")
    cli.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                     help="cpu only to check this script quickly")
    args = cli.parse_args()
    os.environ.setdefault("DLGUIDE_HOME", tempfile.mkdtemp(prefix="bench-home-"))
    if args.quick:  # eager, batch 1, two runs; on the CPU where no GPU is visible (a check of the script)
        args.batch_sizes, args.iters, args.warmup, args.rows = "1", 2, 1, "eager"
        if not torch.cuda.is_available():
            print("no GPU visible to PyTorch: --quick checks this script on the CPU (no GPU figure)")
            args.device = "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU visible to PyTorch: this benchmark measures GPU inference", file=sys.stderr)
        return 2
    standin_weights()
    sizes = tuple(int(s) for s in args.batch_sizes.split(","))
    loaded = load_model("imagenet", device=args.device)
    print(f"{device_name(loaded.device)} · torch {torch.__version__} · {args.iters} runs after {args.warmup} warm-up")
    results = []
    for title in args.rows.split(","):
        name, options = ROWS[title]
        config = BenchConfig(backends=(name,), batch_sizes=sizes, iters=args.iters, warmup=args.warmup,
                             options=options)
        for row in run_benchmark(loaded, config):
            results.append({"row": title, **row.to_json()})
            print(f"  {title:28s} {json.dumps(row.to_json())}", flush=True)
    eager = {r["batch_size"]: r["p50_ms"] for r in results if r["row"] == "eager" and r.get("p50_ms")}
    print("\n| backend | provider | batch | p50 ms | images/s | speed-up vs eager (p50) | max abs diff | top-5 agree |"
          "\n|---|---|---|---|---|---|---|---|")
    for r in results:
        if r.get("error"):
            print(f"| {r['row']} | - | {r.get('batch_size') or '-'} | {r['error']} | | | | |")
            continue
        ratio = eager[r["batch_size"]] / r["p50_ms"] if r["batch_size"] in eager else float("nan")
        print(f"| {r['row']} | {r['provider']} | {r['batch_size']} | {r['p50_ms']:.2f} | {r['images_per_s']:.0f} | "
              f"{ratio:.2f} | {r['max_abs_diff']:.2e} | {r['top5_agree']:.2f} |")
    note = tensorrt_note()
    print(f"\nTensorRT provider: {note}")
    report(result("bench_gpu_inference", {"device": device_name(loaded.device), "torch": torch.__version__,
                                          "rows": results, "tensorrt": note}), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
