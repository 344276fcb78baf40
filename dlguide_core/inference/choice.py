"""Which backend to use: the fastest-choice rule, and the backend and precision choices offered to users.

The ranking is measured (docs/BENCHMARKS.md) and declared with each backend (`specs`); whether a backend or
precision is offered comes from each backend's `availability` here, so the UI and CLI never offer what cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import PRECISIONS, Backend, BackendOptions, Progress
from dlguide_core.inference.registry import backend_class, backend_status, prepare_backend
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess
from dlguide_core.vision.samples import bundled_samples

AGREEMENT_MIN = 0.99  # an approximate variant (int8) is a contender only when its top-1 agrees this often
CHECK_VAL_PHOTOS = 48  # val photos (beyond the bundled ones) it must agree on, where the data roots have some


@dataclass(frozen=True)
class BackendChoice:
    name: str
    options: BackendOptions
    reason: str
    checked: bool = False  # its top-1 must agree with eager's (AGREEMENT_MIN) before it may win (`specs.Ranked`)

    @property
    def label(self) -> str:
        """"ONNX Runtime", "MIGraphX (GPU)": the backend's label for the target it was chosen for."""
        return specs.label(self.name, self.options.target)


def fastest_available(loaded: LoadedModel | None = None) -> BackendChoice:
    """The backend expected to be fastest here: the first untimed variant of the measured ranking
    (`specs.ranking`) that runs here. With the shipped ranking: MIGraphX on an AMD GPU, then ONNX Runtime on a
    GPU provider, then PyTorch on a GPU (where the model is), then ONNX Runtime on the CPU, then eager PyTorch.
    On a CPU host the booth (booth.fastest_measured) then times the `cpu_contenders` against it."""
    on_gpu = (loaded.device.type == "cuda") if loaded is not None else torch.cuda.is_available()
    for name, ranked in specs.ranking():
        if ranked.timed or (name == specs.BASELINE and ranked.target == "gpu" and not on_gpu):
            continue  # the baseline runs where the model is: on the GPU only when the model is there
        choice = _runnable(name, ranked)
        if choice is not None:
            return choice
    return BackendChoice(specs.BASELINE, BackendOptions(), "PyTorch eager")


def _runnable(name: str, ranked: specs.Ranked) -> BackendChoice | None:
    """The choice for one ranked variant where it can run here, else None."""
    options = BackendOptions(target=ranked.target, precision=ranked.precision)
    status = backend_class(name).availability(options)
    if not status.available:
        return None
    return BackendChoice(name, options, ranked.why.format(reason=status.reason), ranked.checked)


def cpu_contenders(choice: BackendChoice) -> list[BackendChoice]:
    """The variants the booth times against a compiled CPU pick (`specs.Ranked.timed`, e.g. ONNX Runtime int8,
    MIGraphX (CPU)) that run here and contend here (`Backend.contends`); none against eager PyTorch."""
    if choice.name == specs.BASELINE or choice.options.target != "cpu":
        return []
    out = []
    for name, ranked in specs.ranking():
        contender = _runnable(name, ranked) if ranked.timed and ranked.target == "cpu" else None
        if contender is not None and backend_class(name).contends(contender.options) is None:
            out.append(contender)
    return out


def check_photos(limit: int = CHECK_VAL_PHOTOS) -> list[Path]:
    """The photos an approximate variant must agree on: the bundled photos, then up to `limit` val photos
    of the datasets under the data roots (<root>/<dataset>/val/images/*.JPEG, tiny-imagenet's layout)."""
    val: list[Path] = []
    for root in settings.data_roots():
        for folder in sorted(root.glob("*/val/images")):
            val += sorted(folder.glob("*.JPEG"))[:limit - len(val)]
    return [*bundled_samples().values(), *val[:limit]]


def top1_agreement(loaded: LoadedModel, backend: Backend, photos: list[Path], chunk: int = 8) -> float:
    """Fraction of `photos` whose top-1 class through `backend` is eager PyTorch's."""
    same = 0
    for start in range(0, len(photos), chunk):
        batch = preprocess([load_image(p) for p in photos[start:start + chunk]], loaded.preset)  # (b, 3, H, W)
        with torch.inference_mode():
            reference = predict_logits(loaded, batch).argmax(1)
        same += int((backend.run(batch).argmax(1) == reference).sum())
    return same / max(1, len(photos))


def prepare_fastest(loaded: LoadedModel, *, batch_size: int = 1, progress: Progress | None = None) -> Backend:
    """Prepare `fastest_available`, falling back to eager PyTorch if that fails (never raises for it)."""
    choice = fastest_available(loaded)
    if choice.name != specs.BASELINE:
        try:
            return prepare_backend(choice.name, loaded, batch_size=batch_size, options=choice.options,
                                   progress=progress)
        except DlguideError:
            pass  # e.g. a broken GPU runtime: eager PyTorch still answers
    return prepare_backend(specs.BASELINE, loaded, batch_size=batch_size, progress=progress)


def available_names(options: BackendOptions | None = None) -> list[str]:
    return [status.name for status in backend_status(options) if status.available]


def backend_choices(options: BackendOptions | None = None) -> list[str]:
    """What a user may pick: PyTorch first (the baseline and default), then each backend that can run here."""
    return [specs.BASELINE, *[name for name in available_names(options) if name != specs.BASELINE]]


def precision_choices(name: str, target: str = "auto") -> tuple[str, ...]:
    """The precisions `name` can run here for `target` (fp32 always first; fp16/int8 need MIGraphX,
    itself or as ONNX Runtime's execution provider)."""
    cls = backend_class(name)
    extra = tuple(p for p in PRECISIONS[1:] if cls.availability(BackendOptions(precision=p, target=target)).available)
    return ("fp32", *extra)


def precision_refusals(name: str, target: str = "auto") -> dict[str, str]:
    """Each precision `name` cannot run here for `target`, with the one-line reason (for the UI and CLI)."""
    cls = backend_class(name)
    states = {p: cls.availability(BackendOptions(precision=p, target=target)) for p in PRECISIONS[1:]}
    return {p: s.reason for p, s in states.items() if not s.available}
