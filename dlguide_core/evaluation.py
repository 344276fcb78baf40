"""Evaluate a model on a held-out split (torchvision's `--test-only`): top-1/top-5, mean loss,
per-class accuracy, the confusion matrix and the most confident mistakes.

Images go through `presets.eval_transform(loaded.preset)`, the recipe's one preprocessing
function, and logits through `classify.predict_logits`, as everywhere else. The ImageNet model
(1000 outputs) is scored on a dataset whose class folders are ImageNet synsets (tiny-imagenet)
by keeping only the outputs of the classes present: a restricted-label score, said so in the result.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypedDict

import numpy as np
import torch
from torch.utils.data import DataLoader, Subset

from dlguide_core.data.class_words import readable_names
from dlguide_core.data.safe_folders import SafeImageFolder
from dlguide_core.errors import DlguideError
from dlguide_core.torchvision_lib import datasets
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.models import LoadedModel, imagenet_class_names
from dlguide_core.vision.presets import eval_transform
from dlguide_core.vision.result_files import confusion_csv

WNIDS_FILE = Path(__file__).with_name("data") / "imagenet_wnids.txt"
MISTAKES_KEPT = 16
RESTRICTED_NOTE = ("restricted-label score: the ImageNet model's 1000 outputs were narrowed to the {n} classes "
                   "of this dataset (argmax and softmax over those only)")
WrongGuess = tuple[float, int, int, int]  # (probability of the wrong class, sample index, target, predicted)
ProgressFn = Callable[[int, int], object]  # its return value is ignored (a Streamlit element's update, say)


class EvaluationError(DlguideError):
    """The model and the data do not fit together (says why)."""


# ------------------------------------------------------------------ metrics (pure numpy)


def confusion_matrix(targets: Sequence[int], predictions: Sequence[int], num_classes: int) -> np.ndarray:
    """(C, C) counts: row = true class, column = predicted class."""
    t, p = np.asarray(targets, dtype=np.int64), np.asarray(predictions, dtype=np.int64)
    return np.bincount(t * num_classes + p, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def per_class_accuracy(matrix: np.ndarray) -> np.ndarray:
    """Top-1 percent per true class (row); NaN for a class with no samples."""
    totals = matrix.sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, 100.0 * np.diag(matrix) / totals, np.nan)


class ConfusionCell(TypedDict):
    true: str
    predicted: str
    count: int
    percent: float  # of the true class's images


class ConfusionJson(TypedDict):
    classes: list[str]  # the dataset's class ids (folder names), in matrix order
    labels: list[str]  # the same classes in words
    matrix: list[list[int]]  # [true][predicted] counts


class MistakeJson(TypedDict):
    image: str
    true: str
    predicted: str
    prob: float


class EvaluationJson(TypedDict):
    """The `evaluate --json` payload (also an evaluation job's stored result and the app's result view)."""

    top1: float
    top5: float
    loss: float
    per_class: dict[str, float]
    confusion: ConfusionJson
    images: int
    images_per_s: float
    seconds: float
    restricted: bool
    note: str | None
    weights: str
    data: str
    split: str
    top_confusions: list[ConfusionCell]
    mistakes: list[MistakeJson]


def top_confusions(matrix: np.ndarray, names: Sequence[str], k: int = 10) -> list[ConfusionCell]:
    """The k largest off-diagonal cells, most frequent first: {true, predicted, count, percent of true}."""
    off = matrix.copy()
    np.fill_diagonal(off, 0)
    order = np.argsort(off, axis=None, kind="stable")[::-1][:k]
    totals = matrix.sum(axis=1)
    out: list[ConfusionCell] = []
    for flat in order:
        i, j = divmod(int(flat), matrix.shape[1])
        if off[i, j] == 0:
            break
        out.append(ConfusionCell(true=names[i], predicted=names[j], count=int(off[i, j]),
                                 percent=round(float(100.0 * off[i, j] / totals[i]), 2)))
    return out


# ------------------------------------------------------------------ which outputs score which class


@lru_cache(maxsize=1)
def imagenet_wnids() -> tuple[str, ...]:
    """The 1000 ImageNet-1k synset ids in the model's output order (sorted ids = class index)."""
    lines = WNIDS_FILE.read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@dataclass(frozen=True)
class LabelSpace:
    """The classes a result is reported over, and how model outputs map onto them."""

    classes: tuple[str, ...]  # ids (folder names) in matrix order
    labels: tuple[str, ...]  # what people read
    outputs: tuple[int, ...] | None  # model output per class when restricted, else None (all outputs)
    restricted: bool


def label_space(loaded: LoadedModel, split_classes: Sequence[str], split_labels: Sequence[str]) -> LabelSpace:
    """Checkpoints report over their own classes; the ImageNet model over the dataset's synsets."""
    model_names = tuple(loaded.class_names)
    if len(model_names) == 1000 and model_names == imagenet_class_names():
        index = {wnid: i for i, wnid in enumerate(imagenet_wnids())}
        unknown = [c for c in split_classes if c not in index]
        if unknown:
            raise EvaluationError(f"{loaded.label} has ImageNet's 1000 classes; this data's class folders must be "
                                  f"ImageNet synset ids (as tiny-imagenet's n01443537), not {unknown[0]!r}")
        return LabelSpace(tuple(split_classes), tuple(split_labels), tuple(index[c] for c in split_classes), True)
    for names in (tuple(split_classes), tuple(split_labels)):  # checkpoints may hold ids or readable names
        if set(names) <= set(model_names):
            ids = [split_classes[names.index(n)] if n in names else n for n in model_names]
            return LabelSpace(tuple(ids), model_names, None, False)
    missing = next(c for c in split_classes if c not in model_names)
    raise EvaluationError(f"{loaded.label} was not trained on class {missing!r} of this data "
                          f"(it knows {len(model_names)} classes: {', '.join(model_names[:4])}, ...)")


# ------------------------------------------------------------------ the result


@dataclass(frozen=True)
class Mistake:
    image: str
    true: str
    predicted: str
    prob: float


@dataclass(frozen=True)
class EvalResult:
    space: LabelSpace
    matrix: np.ndarray = field(repr=False, compare=False)  # (C, C) counts
    top1: float
    top5: float
    loss: float
    images: int
    seconds: float
    weights: str
    data: str
    split: str
    mistakes: tuple[Mistake, ...] = ()

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0

    @property
    def per_class(self) -> dict[str, float]:
        accuracy = per_class_accuracy(self.matrix)
        return {c: round(float(a), 2) for c, a in zip(self.space.classes, accuracy) if not np.isnan(a)}

    @property
    def note(self) -> str | None:
        return RESTRICTED_NOTE.format(n=len(self.space.classes)) if self.space.restricted else None

    def to_json(self) -> EvaluationJson:
        """The `evaluate --json` contract: top1, top5, loss, per_class, confusion, images, images_per_s
        (+ restricted, note, what was evaluated, top confusions and the most confident mistakes)."""
        return EvaluationJson(
            top1=self.top1, top5=self.top5, loss=self.loss, per_class=self.per_class,
            confusion=ConfusionJson(classes=list(self.space.classes), labels=list(self.space.labels),
                                    matrix=self.matrix.tolist()),
            images=self.images, images_per_s=self.images_per_s, seconds=self.seconds,
            restricted=self.space.restricted, note=self.note, weights=self.weights, data=self.data, split=self.split,
            top_confusions=top_confusions(self.matrix, self.space.labels),
            mistakes=[MistakeJson(image=m.image, true=m.true, predicted=m.predicted, prob=m.prob)
                      for m in self.mistakes])

    def confusion_csv(self) -> str:
        return confusion_csv({"classes": self.space.classes, "matrix": self.matrix.tolist()})


# ------------------------------------------------------------------ the loop


def split_dataset(data: str | Path, split: str, loaded: LoadedModel) -> datasets.ImageFolder:
    """DIR/SPLIT/<class>/** as an ImageFolder transformed by the model's own eval preset."""
    folder = Path(data) / split
    if not folder.is_dir():
        raise EvaluationError(f"{data} has no {split}/ folder of class folders (run `prepare` for tiny-imagenet)")
    try:
        # Decoded like uploads; unreadable files skipped, past 1% a DatasetError (issue 18, data.safe_folders)
        return SafeImageFolder(str(folder), transform=eval_transform(loaded.preset))
    except (FileNotFoundError, RuntimeError) as exc:  # no class folders / no images
        raise EvaluationError(f"{folder}: {exc}") from None


def pick(count: int, limit: int | None) -> list[int]:
    """`limit` indices spread evenly over a class-sorted dataset (every class keeps its share)."""
    if not limit or limit >= count:
        return list(range(count))
    return sorted({int(i) for i in np.linspace(0, count - 1, limit)})


def evaluate_model(loaded: LoadedModel, data: str | Path, *, split: str = "val", batch_size: int = 32,
                   limit: int | None = None, progress: ProgressFn | None = None) -> EvalResult:
    """Score `loaded` on DATA/SPLIT; `progress(done, total)` after every batch."""
    dataset = split_dataset(data, split, loaded)
    space = label_space(loaded, dataset.classes, readable_names(Path(data), tuple(dataset.classes)))
    to_space = np.array([space.classes.index(c) for c in dataset.classes])  # dataset index -> matrix index
    indices = pick(len(dataset), limit)
    loader = DataLoader(Subset(dataset, indices), batch_size=batch_size, shuffle=False)
    outputs = torch.tensor(space.outputs) if space.outputs is not None else None
    counts = np.zeros((len(space.classes),) * 2, dtype=np.int64)
    mistakes: list[WrongGuess] = []
    loss_sum, top1, top5, done, start = 0.0, 0, 0, 0, time.perf_counter()
    for images, targets in loader:
        logits = predict_logits(loaded, images)  # (B, outputs) float32 on the CPU
        logits = logits[:, outputs] if outputs is not None else logits  # (B, C)
        targets = torch.from_numpy(to_space[targets.numpy()])
        loss_sum += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
        probs = torch.softmax(logits, dim=1)
        # Rank logits, not probabilities: a saturated softmax ties at 0.0 and would rank ties arbitrarily.
        ranked = logits.topk(min(5, logits.shape[1]), dim=1).indices  # (B, k)
        top1 += int((ranked[:, 0] == targets).sum())
        top5 += int((ranked == targets[:, None]).any(dim=1).sum())
        counts += confusion_matrix(targets.tolist(), ranked[:, 0].tolist(), len(space.classes))
        _keep_mistakes(mistakes, probs, ranked[:, 0], targets, [indices[done + i] for i in range(len(targets))])
        done += len(targets)
        if progress:
            progress(done, len(indices))
    seconds = time.perf_counter() - start
    shown = [Mistake(dataset.samples[i][0], space.labels[t], space.labels[p], round(prob, 4))
             for prob, i, t, p in sorted(mistakes, reverse=True)]
    return EvalResult(space, counts, 100.0 * top1 / max(done, 1), 100.0 * top5 / max(done, 1),
                      loss_sum / max(done, 1), done, seconds, loaded.label, str(data), split, tuple(shown))


def _keep_mistakes(heap: list[WrongGuess], probs: torch.Tensor, predicted: torch.Tensor, targets: torch.Tensor,
                   samples: list[int]) -> None:
    """Keep the MISTAKES_KEPT wrong predictions with the highest probability (a min-heap)."""
    for row in torch.nonzero(predicted != targets).flatten().tolist():
        item = (float(probs[row, predicted[row]]), samples[row], int(targets[row]), int(predicted[row]))
        if len(heap) < MISTAKES_KEPT:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
