"""The booth's own forward, timed in this process beside a served booth: the backend its "booth ready" line names,
prepared here with the server's environment (its export reused), timed at batch 1 and at the batch sizes the
server formed; CPU ms per image and images/s. bench/'s booth load benches set the server's CPU against it."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.standin_weights import weights_env

WARMUP_RUNS = 5


def booth_backend(booth_line: str):
    """(label, the prepared backend or None, the loaded model): the backend the booth's "booth ready" line names
    ("LABEL · PROVIDER on DEVICE"), prepared in this process; the environment is the server's (DLGUIDE_HOME's export
    is reused, not redone)."""
    from dlguide_core.booth import variant_label
    from dlguide_core.inference import registry, specs
    from dlguide_core.inference.backend_base import BackendOptions
    from dlguide_core.vision.models import load_model

    loaded = load_model("imagenet")
    label = booth_line.split(" · ")[0]
    for name, ranked in specs.ranking():
        options = BackendOptions(target=ranked.target, precision=ranked.precision)
        if name == specs.BASELINE:
            options = BackendOptions()
        want = specs.label(name, ranked.target) + ("" if ranked.precision == "fp32" else f" {ranked.precision}")
        if want == label or (name == specs.BASELINE and label == specs.label(name)):
            if not registry.backend_class(name).availability(options).available:
                continue  # a label two targets share ("ONNX Runtime" on the GPU and the CPU): the one that runs here
            backend = registry.prepare_backend(name, loaded, options=options)
            return variant_label(backend), backend, loaded
    return label, None, loaded


def time_forward(backend, loaded, size: int, runs: int, warmup: int = 0) -> dict[str, float]:
    """`runs` forwards of a batch of `size` (after `warmup`): CPU ms per image (process CPU, all threads), the
    batch's wall ms, images/s."""
    from dlguide_core.inference.backend_base import sample_batch

    batch = sample_batch(loaded, size)
    for _ in range(warmup):
        backend.run(batch)
    if not runs:
        return {}
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(runs):
        backend.run(batch)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_ms_per_image": cpu * 1000 / (runs * size), "batch_wall_ms": wall * 1000 / runs,
            "images_per_s": runs * size / wall}


def forward_cpu(booth_line: str, batch_histogram: dict[str, int], iters: int = 8, batch1_iters: int = 60,
                prepared=None) -> dict:
    """The booth backend's own forward, in this process with the server stopped: CPU ms per image (process CPU,
    all threads) and images/s at batch 1 (`batch1_iters` forwards in three blocks, the median block; single blocks
    of 8 read 90-165 ms for the same int8 forward here) and at each batch size the server ran (three blocks of
    `iters`, the median block), after WARMUP_RUNS at each shape, plus the images/s it does alone at the batch sizes
    the server formed (its histogram weighted).
    `prepared`: booth_backend's answer, when this process has it already."""
    label, backend, loaded = prepared or booth_backend(booth_line)
    if backend is None:
        return {"backend": label, "error": "not matched"}
    sizes = sorted({1, *(int(b) for b in batch_histogram)})
    rows: dict[str, dict] = {}
    for size in sizes:
        time_forward(backend, loaded, size, 0, warmup=WARMUP_RUNS)  # at this shape: the first runs allocate
        blocks = sorted((time_forward(backend, loaded, size, batch1_iters // 3 if size == 1 else iters)
                         for _ in range(3)), key=lambda block: block["cpu_ms_per_image"])
        rows[str(size)] = {**blocks[len(blocks) // 2],
                           "cpu_ms_per_image_blocks": [round(b["cpu_ms_per_image"], 1) for b in blocks]}
    counts = {b: n / int(b) for b, n in batch_histogram.items()}  # batches run, from answers per batch size
    images, seconds = (sum(c * int(b) for b, c in counts.items()),
                       sum(c * rows[b]["batch_wall_ms"] / 1000 for b, c in counts.items()))
    return {"backend": label, "by_batch": rows, "alone_images_per_s_at_formed_batches":
            images / seconds if seconds else rows["1"]["images_per_s"]}


def ready_line(log_path: Path) -> str | None:
    """What served the visitors: the launcher's "booth ready in N s: BACKEND · PROVIDER on DEVICE" line's
    "BACKEND · PROVIDER on DEVICE", None before it is written."""
    ready = [line for line in log_path.read_text(errors="replace").splitlines() if "booth ready" in line]
    return ready[0].split("booth ready in", 1)[1].split(": ", 1)[-1] if ready else None


def probe_forward(backend, loaded) -> float:
    """The batch-1 forward's CPU ms per image now: the median of three blocks of 10."""
    blocks = sorted(time_forward(backend, loaded, 1, 10)["cpu_ms_per_image"] for _ in range(3))
    return blocks[1]


def kept_weights(home: Path) -> dict[str, str]:
    """`weights_env` once per DLGUIDE_HOME: a kept --home reuses its stand-in weights (and so its export)."""
    if (home / "torch_home").is_dir():
        return {"TORCH_HOME": str(home / "torch_home")}
    return weights_env(home)
