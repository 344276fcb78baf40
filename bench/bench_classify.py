"""Warm single-image classification: dlguide's core path vs the guide's own snippet.

Both run in this one process, interleaved (A, B, A, B, ...) on the same image and the
same weights, so machine noise hits both alike; the ratio of medians is the result.
Also reports the resident memory of this process with the model loaded.

    .venv/bin/python -m bench.bench_classify [--iters 30] [--image PATH] [--json out.json]
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import psutil
import torch
from PIL import Image
from torchvision import transforms
from torchvision.models import inception_v3

from bench.common import parser, report, result
from dlguide_core.vision.classify import classify_images
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import imagenet_weights_path, load_model
from tests.support.paths import BUNDLED_SAMPLE

SAMPLE = BUNDLED_SAMPLE


def guide_model(state: dict) -> torch.nn.Module:
    model = inception_v3(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    model.load_state_dict(state)
    return model.eval()


def guide_classify(model: torch.nn.Module, path: Path) -> list[int]:
    """The guide's 'Evaluating a Pretrained Model' code, as written there."""
    preprocess = transforms.Compose([
        transforms.Resize(299), transforms.CenterCrop(299), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    input_batch = preprocess(Image.open(path)).unsqueeze(0)
    with torch.no_grad():
        output = model(input_batch)
    probabilities = torch.nn.functional.softmax(output[0], dim=0)
    return torch.topk(probabilities, 5).indices.tolist()


def core_classify(loaded, path: Path) -> list[int]:
    return [p.index for p in classify_images(loaded, [load_image(path)], k=5)[0]]


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--iters", type=int, default=30)
    options.add_argument("--image", type=Path, default=SAMPLE)
    args = options.parse_args()
    if args.quick:
        args.iters = 2

    rss_before = psutil.Process().memory_info().rss
    if imagenet_weights_path().is_file():
        weights = "imagenet"
        state = torch.load(imagenet_weights_path(), map_location="cpu", weights_only=True)
    else:  # offline: the same architecture with seeded random weights (timing does not depend on values)
        torch.manual_seed(0)
        weights = "seeded random (ImageNet weights not cached)"
        state = inception_v3(weights=None, aux_logits=True, transform_input=True, init_weights=True).state_dict()
        path = Path(os.environ.get("TMPDIR", "/tmp")) / "dlguide_bench_torch_home"
        (path / "hub" / "checkpoints").mkdir(parents=True, exist_ok=True)
        torch.save(state, path / "hub" / "checkpoints" / imagenet_weights_path().name)
        os.environ["TORCH_HOME"] = str(path)
    loaded = load_model("imagenet", device="cpu")
    core_classify(loaded, args.image)  # warm-up
    rss_loaded = psutil.Process().memory_info().rss
    reference = guide_model(state)
    assert guide_classify(reference, args.image) == core_classify(loaded, args.image), "paths disagree"

    core_t: list[float] = []
    guide_t: list[float] = []
    for _ in range(args.iters):
        for fn, model, sink in ((core_classify, loaded, core_t), (guide_classify, reference, guide_t)):
            start = time.perf_counter()
            fn(model, args.image)
            sink.append(time.perf_counter() - start)
    figures = {
        "torch": f"torch {torch.__version__}, {torch.get_num_threads()} threads",
        "weights": weights, "image": args.image.name, "iters": args.iters,
        "core_median_ms": round(statistics.median(core_t) * 1e3, 2),
        "guide_median_ms": round(statistics.median(guide_t) * 1e3, 2),
        "ratio_core_over_guide": round(statistics.median(core_t) / statistics.median(guide_t), 3),
        "rss_model_loaded_mib": round(rss_loaded / 2**20, 1),
        "rss_before_model_mib": round(rss_before / 2**20, 1),
    }
    report(result("bench_classify", figures), args.json)


if __name__ == "__main__":
    main()
