"""Teach a model new names from a few photos (issue 44): a small head on the frozen model's pooled features, ranked
together with the model's own classes, and saved as an ordinary dlguide checkpoint.

How it learns. Each photo goes through the model once; the backend returns the pooled features (2048 for Inception
v3) beside the logits (`backend_base.Outputs`). The taught head is one linear layer on those features, trained in
a few dozen full-batch Adam steps (the loss curve: the joint cross-entropy below at each step; tens of
milliseconds on a CPU: `fit_head`).

How it is calibrated against the model's own classes (so an ImageNet object is not forced into a taught name). The
answer is ONE softmax over [the model's C logits, the N taught logits]: the taught logits are trained in that very
softmax, not in one of their own. For a visitor's photo the target is its taught name against all C + N classes;
for a set of reference photos of ordinary objects (the bundled sample photos, flipped and cropped: `references`)
the target is "any of the model's own classes" (the log of their summed probability). So the head learns both to
tell the taught names apart and to stay below the model's own answer on things that are none of them. Then a
margin check on the training rows moves the taught biases to the midpoint between the weakest taught row's margin
over the model's classes and the strongest reference row's (`calibrate`): the boundary sits halfway, not where the
optimiser happened to stop.

Features are centred and scaled (per dimension) before the head; the scaling is folded back into the head, so the
taught logits are `features @ weight.T + bias`: for a visitor who has taught, the forward is the same forward plus
this one matmul, and the saved checkpoint is the model with C + N outputs (its head's rows: the model's own, then
the taught ones), which every part of dlguide loads as any checkpoint.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from PIL import Image, ImageOps

from dlguide_core.errors import UsageError
from dlguide_core.inference.backend_base import Outputs, eager_outputs, head_layer
from dlguide_core.vision.classify import Prediction
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess

NAME_MAX_CHARS = 40  # a taught name: plain text, at most this long
MIN_NAMES, MIN_PHOTOS = 2, 3  # learning needs at least 2 names with at least 3 photos each
STEPS = 60  # full-batch Adam steps (the loss curve has one point per step)
LEARNING_RATE = 0.01
WEIGHT_DECAY = 1e-3
REFERENCE_WEIGHT = 1.0  # the reference rows' share of the loss, against the taught rows' (each set's mean)
FORBIDDEN = set("<>")  # markup: a name is shown as text everywhere, but one that looks like markup is refused

Forward = Callable[[torch.Tensor], Outputs]  # (B, 3, crop, crop) preprocessed -> both heads (a backend's run_features)


@dataclass(frozen=True)
class TaughtHead:
    """A head learned from a visitor's photos: taught logits = features @ weight.T + bias, calibrated to be ranked in
    one softmax with the model's own logits (module doc)."""

    names: tuple[str, ...]
    weight: torch.Tensor = field(repr=False, compare=False)  # (N, D)
    bias: torch.Tensor = field(repr=False, compare=False)  # (N,)
    counts: tuple[int, ...]  # photos per name, in `names` order
    loss: tuple[float, ...]  # the training loss at each step
    train_ms: float  # the head's training (standardising, Adam steps, calibration)
    base_classes: int  # C: the model's own classes; a taught name's index in the ranking is C + its position

    @property
    def examples(self) -> int:
        return sum(self.counts)

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """(B, D) features -> (B, N) taught logits, on the scale of the model's own logits."""
        return features.float() @ self.weight.T + self.bias


@dataclass(frozen=True)
class Ranked(Prediction):
    """One row of an answer that ranks taught names with the model's own classes: index < C is the model's class,
    index >= C the taught name C + i."""

    taught: bool = False


def check_name(raw: str) -> str:
    """A taught name as given, trimmed; UsageError (one line) when empty, too long, or holding control characters
    or markup."""
    stripped = raw.strip()
    if any(unicodedata.category(c).startswith("C") for c in stripped):
        raise UsageError("the name holds control characters: use plain text")
    name = " ".join(stripped.split())
    if not name:
        raise UsageError("the name is empty: type what the photos show")
    if len(name) > NAME_MAX_CHARS:
        raise UsageError(f"the name is too long: at most {NAME_MAX_CHARS} characters")
    if FORBIDDEN & set(name):
        raise UsageError("the name looks like markup (< or >): use plain text")
    return name


def features_of(loaded: LoadedModel, images: Sequence[Image.Image], *, forward: Forward | None = None,
                batch_size: int = 8) -> Outputs:
    """Logits and pooled features of `images` (preprocessed with the model's preset), in batches; the eager model
    unless `forward` (e.g. a prepared backend's run_features) is given."""
    run = forward or (lambda batch: eager_outputs(loaded, batch))
    parts = [run(preprocess(list(images[i:i + batch_size]), loaded.preset)) for i in range(0, len(images), batch_size)]
    if not parts:
        raise UsageError("no photos to take features from")
    return Outputs(torch.cat([p.logits for p in parts]), torch.cat([p.features for p in parts]))


def reference_images() -> list[Image.Image]:
    """Ordinary objects the taught names must not swallow: the bundled sample photos, each as is, mirrored, and as
    four corner crops and a centre crop (28 views of 2 photos)."""
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.samples import bundled_samples

    views: list[Image.Image] = []
    for path in bundled_samples().values():
        image = load_image(path).convert("RGB")
        for shown in (image, ImageOps.mirror(image)):
            w, h = shown.size
            cw, ch = int(w * 0.6), int(h * 0.6)
            views.append(shown)
            views.extend(shown.crop((x, y, x + cw, y + ch)) for x in (0, w - cw) for y in (0, h - ch))
            views.append(shown.crop(((w - cw) // 2, (h - ch) // 2, (w + cw) // 2, (h + ch) // 2)))
            views.append(ImageOps.grayscale(shown).convert("RGB"))
    return views


def references(loaded: LoadedModel, forward: Forward | None = None) -> Outputs:
    """The reference photos' logits and features (computed once per model and backend by the caller)."""
    return features_of(loaded, reference_images(), forward=forward)


def fit_head(taught: Mapping[str, Outputs], refs: Outputs | None = None, *, steps: int = STEPS,
             seed: int = 0) -> TaughtHead:
    """Train the taught head on each name's rows (module doc); UsageError unless there are MIN_NAMES names with
    MIN_PHOTOS photos each."""
    check_enough({name: len(out.features) for name, out in taught.items()})
    start = time.perf_counter()
    names = tuple(taught)
    feats = torch.cat([taught[n].features for n in names]).double()
    labels = torch.cat([torch.full((len(taught[n].features),), i, dtype=torch.long) for i, n in enumerate(names)])
    base = torch.cat([torch.logsumexp(taught[n].logits.double(), dim=1) for n in names])  # (M,) the model's classes
    ref_feats = refs.features.double() if refs is not None else feats[:0]
    ref_base = torch.logsumexp(refs.logits.double(), dim=1) if refs is not None else base[:0]
    every = torch.cat([feats, ref_feats])
    mean = every.mean(0)
    scale = every.std(0, unbiased=False)
    scale = scale + scale.mean() * 1e-2 + 1e-30  # a dimension that does not vary is not blown up
    z, zr = (feats - mean) / scale, (ref_feats - mean) / scale

    generator = torch.Generator().manual_seed(seed)
    weight = (torch.randn(len(names), z.shape[1], generator=generator, dtype=torch.float64) * 1e-3).requires_grad_()
    bias = base.mean().detach().clone().repeat(len(names)).requires_grad_()  # start level with the model's answer
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in (weight, bias)]
    losses = []
    with torch.enable_grad():
        for step in range(1, steps + 1):
            loss = _loss(z, labels, base, zr, ref_base, weight, bias)
            grads = torch.autograd.grad(loss + WEIGHT_DECAY * weight.pow(2).sum(), (weight, bias))
            with torch.no_grad():
                for param, grad, (m, v) in zip((weight, bias), grads, moments, strict=True):
                    _adam_step(param, grad, m, v, step)
            losses.append(float(loss.detach()))
    with torch.no_grad():
        folded_w = weight.detach() / scale  # taught logits on the raw features: ((f - mean) / scale) @ W.T + b
        folded_b = bias.detach() - folded_w @ mean
        folded_b = folded_b + calibrate(feats @ folded_w.T + folded_b, labels, base,
                                        ref_feats @ folded_w.T + folded_b, ref_base)
    train_ms = (time.perf_counter() - start) * 1000
    return TaughtHead(names, folded_w.float(), folded_b.float(), tuple(len(taught[n].features) for n in names),
                      tuple(round(x, 5) for x in losses), round(train_ms, 2), int(taught[names[0]].logits.shape[1]))


def _adam_step(param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int,
               beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
    """One Adam update in place (written out: torch.optim's first use imports torch._dynamo, a second and ~150 MB in a
    server that never compiles)."""
    m.mul_(beta1).add_(grad, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
    param.sub_(LEARNING_RATE * m_hat / (v_hat.sqrt() + eps))


def _loss(z: torch.Tensor, labels: torch.Tensor, base: torch.Tensor, zr: torch.Tensor, ref_base: torch.Tensor,
          weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Cross-entropy in the joint softmax [model's classes (their logsumexp), taught logits]: the taught rows'
    target is their name; the reference rows' target is the model's own classes."""
    taught = z @ weight.T + bias
    joint = torch.cat([base[:, None], taught], dim=1)
    loss = torch.nn.functional.cross_entropy(joint, labels + 1)
    if len(zr):
        ref_joint = torch.cat([ref_base[:, None], zr @ weight.T + bias], dim=1)
        loss = loss + REFERENCE_WEIGHT * (torch.logsumexp(ref_joint, 1) - ref_base).mean()
    return loss


def calibrate(taught: torch.Tensor, labels: torch.Tensor, base: torch.Tensor, ref_taught: torch.Tensor,
              ref_base: torch.Tensor) -> torch.Tensor:
    """The shift of every taught bias that puts the boundary halfway between the weakest taught row's margin over the
    model's own classes (its name's logit minus their logsumexp) and the strongest reference row's (its best taught
    logit minus the same); 0 when the two overlap or there are no reference rows."""
    if not len(ref_taught):
        return torch.zeros((), dtype=taught.dtype)
    weakest = (taught.gather(1, labels[:, None]).squeeze(1) - base).min()
    strongest = (ref_taught.max(1).values - ref_base).max()
    if weakest <= strongest:
        return torch.zeros((), dtype=taught.dtype)
    return -(weakest + strongest) / 2


def check_enough(counts: Mapping[str, int]) -> None:
    """UsageError (one line) unless there are MIN_NAMES names with MIN_PHOTOS photos each."""
    if len(counts) < MIN_NAMES:
        raise UsageError(f"teach at least {MIN_NAMES} names before learning (there {_are(len(counts))})")
    few = [name for name, count in counts.items() if count < MIN_PHOTOS]
    if few:
        raise UsageError(f"{few[0]} has {counts[few[0]]} photo{'s' if counts[few[0]] != 1 else ''}: "
                         f"show it at least {MIN_PHOTOS}")


def _are(count: int) -> str:
    return "is 1" if count == 1 else f"are {count}"


def rank(class_names: Sequence[str], head: TaughtHead | None, logits: torch.Tensor, features: torch.Tensor | None,
         k: int = 5) -> list[tuple[Ranked, ...]]:
    """Per row, the k most probable of the model's classes and the taught names, in one softmax (taught = True for
    a taught name); without a head, the model's classes alone (all taught = False)."""
    joint = logits.float()
    labels = list(class_names)
    if head is not None and features is not None:
        joint = torch.cat([joint, head.logits(features)], dim=1)
        labels += list(head.names)
    probs = torch.softmax(joint, dim=1)
    values, indices = torch.topk(probs, min(k, probs.shape[1]), dim=1)
    base = logits.shape[1]
    return [tuple(Ranked(labels[i], int(i), float(p), taught=i >= base) for p, i in zip(row_p.tolist(), row_i.tolist()))
            for row_p, row_i in zip(values, indices)]


def teach_images(loaded: LoadedModel, photos: Mapping[str, Sequence[Image.Image]], *,
                 forward: Forward | None = None) -> TaughtHead:
    """Features of each name's photos and the head trained on them, in one call (the Classify page, the CLI)."""
    taught = {check_name(name): features_of(loaded, images, forward=forward) for name, images in photos.items()}
    return fit_head(taught, references(loaded, forward))


def taught_state(loaded: LoadedModel, head: TaughtHead) -> dict[str, torch.Tensor]:
    """`loaded`'s state dict with its head widened to C + N outputs: its own rows, then the taught rows."""
    from dlguide_core.vision.architectures import architecture

    layer = head_layer(loaded)
    prefix = architecture(loaded.arch).head
    state = {k: v.detach().cpu().clone() for k, v in loaded.model.state_dict().items()}
    state[f"{prefix}.weight"] = torch.cat([layer.weight.detach().cpu().float(), head.weight])
    state[f"{prefix}.bias"] = torch.cat([layer.bias.detach().cpu().float(), head.bias])
    return state


def save_taught_checkpoint(loaded: LoadedModel, head: TaughtHead, out: str | Path) -> Path:
    """Write a dlguide checkpoint of `loaded` that also answers the taught names (module doc): `classify --weights`,
    `evaluate`, the Classify page and the booth (DLGUIDE_KIOSK_WEIGHTS) load it as any checkpoint."""
    from dlguide_core.vision.checkpoints import save_checkpoint

    if len(loaded.class_names) != head.base_classes:
        raise UsageError(f"this head was taught on a model with {head.base_classes} classes, not "
                         f"{len(loaded.class_names)}")
    clash = sorted(set(head.names) & set(loaded.class_names))
    names = [*loaded.class_names, *(f"{n} (taught)" if n in clash else n for n in head.names)]
    payload = {
        "arch": loaded.arch,
        "arch_kwargs": {**dict(loaded.arch_kwargs), "num_classes": len(names)},
        "class_names": names,
        "preset": loaded.preset.to_dict(),
        "model": taught_state(loaded, head),
        "taught_names": list(head.names),
        "taught_from": loaded.source,
        "taught_counts": list(head.counts),
    }
    return save_checkpoint(out, payload)
