"""A long evaluation as a job of the store (issue 13); a short one stays inline.

The `evaluate` job kind runs `evaluation.evaluate_model` (the recipe's one preprocessing function,
`presets.eval_transform`) in its own process, like training: progress goes through the sink as
steps (step = images scored so far, total_steps = images to score), so the job table, `jobs list`
and the ETA show it unchanged; cancel is honoured between batches; the finished result, the exact
`evaluate --json` payload, is written atomically to the job folder as `evaluation.json`.

When is an evaluation long? When it scores more than `inline_max()` images after `--limit`
(INLINE_MAX_IMAGES, or DLGUIDE_EVAL_INLINE_MAX): about a minute for Inception v3 on a CPU, where a
page would otherwise hang with nothing to show after a tab reload. Counting images is cheap and
needs no model; the CLI always runs inline unless `--detach` is given.

Torch-free at import: `jobs show` reads results through here.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlguide_core.gpu_slots import gpu_index
from dlguide_core.jobs.store import Job, JobStore, job_dir
from dlguide_core.training.configs import RunContext, RunResult
from dlguide_core.training.fields import MAX_STEPS, ConfigError, Flag, check_fields, device_field, plain, whole
from dlguide_core.training.recipes import Recipe
from dlguide_core.vision.architectures import UNTRAINED, parse_source

if TYPE_CHECKING:  # dlguide_core.evaluation imports torch: only the job itself loads it
    from dlguide_core.evaluation import EvaluationJson

EVALUATE_RECIPE = "evaluate"
RESULT_FILE = "evaluation.json"
INLINE_MAX_ENV = "DLGUIDE_EVAL_INLINE_MAX"
INLINE_MAX_IMAGES = 2000  # more images than this after the limit: a job of the store


@dataclass(frozen=True)
class EvaluateConfig:
    """What `evaluate` scores: weights (imagenet or a checkpoint path) on DATA/SPLIT. The fields declare the
    `evaluate` command's flags (cli/evaluate.py) and their ranges (training/fields.py)."""

    weights: str = plain("", "weights", flag=Flag(
        "{imagenet,PATH}", "imagenet (scored on ImageNet-synset data such as tiny-imagenet: a restricted-label score) "
        "or a dlguide checkpoint PATH"))
    data: str = plain("", "data", flag=Flag("DIR", "dataset folder holding SPLIT/<class>/ images"))
    split: str = plain("val", "split", flag=Flag(help="the folder under DIR to score (default: val)"))
    batch_size: int = whole(32, "batch size", 1, 65_536, flag=Flag("B"))
    # None: every image of the split
    limit: int | None = whole(None, "limit", 1, MAX_STEPS, flag=Flag(
        "N", "score N images spread evenly over the split (every class keeps its share)"))
    device: str = device_field(flag=Flag(help="torch device (default: best available)"))  # auto, cpu, cuda or cuda:N

    def __post_init__(self) -> None:
        named = parse_source(self.weights) if self.weights else None
        if not self.weights or (named is not None and named[1] == UNTRAINED):
            raise ConfigError("evaluate needs weights: imagenet or a checkpoint path")
        if not self.data:
            raise ConfigError("evaluate needs a dataset folder")
        check_fields(self)


class _Stopped(Exception):
    """Cancel (or a shutdown) asked between two batches."""


def inline_max() -> int:
    """The most images an evaluation scores inline: DLGUIDE_EVAL_INLINE_MAX, else INLINE_MAX_IMAGES."""
    raw = os.environ.get(INLINE_MAX_ENV, "").strip()
    return int(raw) if raw.isdigit() else INLINE_MAX_IMAGES


def images_to_score(data: str | Path, split: str, limit: int | None) -> int:
    """How many images DATA/SPLIT/<class>/** holds, capped by `limit` (what evaluate_model scores)."""
    from dlguide_core.vision.images import IMAGE_SUFFIXES  # the files SafeImageFolder reads (PIL: imported here only)

    folder = Path(data) / split
    count = sum(1 for p in folder.glob("*/**/*") if p.suffix.lower() in IMAGE_SUFFIXES) if folder.is_dir() else 0
    return min(count, limit) if limit else count


def is_long(data: str | Path, split: str, limit: int | None) -> bool:
    return images_to_score(data, split, limit) > inline_max()


def result_path(job_id: str) -> Path:
    return job_dir(job_id) / RESULT_FILE


def stored_result(job_id: str) -> EvaluationJson | None:
    """A finished evaluation job's `evaluate --json` payload; None before it finishes (or if it failed)."""
    try:
        result: EvaluationJson = json.loads(result_path(job_id).read_text())  # written by the job from to_json()
        return result
    except (OSError, ValueError):
        return None


def latest_job(store: JobStore, weights: str, *, refresh: bool = False) -> Job | None:
    """The newest evaluation job of `weights` (the page finds its result again after a reload)."""
    found = [j for j in store.list_jobs(refresh=refresh)
             if j.recipe == EVALUATE_RECIPE and j.config.get("weights") == weights]
    return max(found, key=lambda j: j.created, default=None)


def _write_atomically(path: Path, data: Mapping[str, object]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
        os.replace(tmp, path)  # a reader sees no file or the whole result
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _device(device: str, slot: int) -> str | None:
    """`auto` follows the queue's device rule (gpu_slots.gpu_index) on a GPU machine, else best available."""
    if device != "auto":
        return device
    import torch

    return f"cuda:{gpu_index(slot, torch.cuda.device_count())}" if torch.cuda.is_available() else None


def run_evaluation(cfg: EvaluateConfig, ctx: RunContext) -> RunResult:
    """The job's run function: score, report images done as steps, write evaluation.json."""
    from dlguide_core.evaluation import evaluate_model
    from dlguide_core.vision.models import load_model

    sink, start, reported = ctx.sink, time.perf_counter(), [0]
    loaded = load_model(cfg.weights, device=_device(cfg.device, ctx.slot))

    def progress(done: int, total: int) -> None:
        if not reported[0]:  # the plan: total is known once the split is read
            sink.on_start(total_steps=total, epochs=1, class_names=tuple(loaded.class_names),
                          start_step=0, start_epoch=0)
        reported[0] = done
        sink.on_step(done, 0, float("nan"), 0.0, done / max(time.perf_counter() - start, 1e-9))
        if done < total and sink.should_stop():
            raise _Stopped

    if sink.should_stop():
        return RunResult("stopped", 0, 0)
    try:
        result = evaluate_model(loaded, cfg.data, split=cfg.split, batch_size=cfg.batch_size, limit=cfg.limit,
                                progress=progress)
    except _Stopped:
        sink.flush()
        return RunResult("stopped", reported[0], 0)
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    _write_atomically(ctx.job_dir / RESULT_FILE, result.to_json())
    sink.flush()
    return RunResult("completed", result.images, 1)


def evaluation_recipe() -> Recipe:
    """The `evaluate` job kind, for the registry (jobs.catalog registers it)."""
    return Recipe(EVALUATE_RECIPE, "pytorch", EvaluateConfig, "dlguide_core.jobs.evaluation_job:run_evaluation",
                  "Evaluate weights on a held-out split (a long evaluation)", kind="evaluate")
