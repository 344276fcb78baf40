"""The Classify page's Teach flow (issue 44), as the booth's Teach tab does it: names and a few photos of each, "Learn"
(a new last layer on the frozen model's pooled features: dlguide_core.teach), its loss curve, photos classified
with the taught names ranked among the model's own classes, and "Save as checkpoint" (a dlguide checkpoint in
DLGUIDE_HOME/taught/, offered as a download too, and listed in the Weights picker).

The photos' forwards run in the Classify page's shared batching worker (ui.cache.classify_task: between other
sessions' batches, not beside them); each name's features are kept in this session, keyed by its photos, so a
"Learn" after one more name runs only that name's photos. The head's training itself takes a few hundred ms."""

from __future__ import annotations

import hashlib
import html
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from dlguide_core.inference.backend_base import Outputs
    from dlguide_core.teach import TaughtHead
    from dlguide_core.vision.models import LoadedModel

TAUGHT_MARK = "taught just now"
EXPLAIN = ("The big model stayed frozen: a new last layer was learned from your {examples} photos of {names} names, "
           "in {ms:.0f} ms on {device}.")


@dataclass(frozen=True)
class Lesson:
    """What this session taught: the head, on which model (its fingerprint), and where it trained."""

    fingerprint: str
    weights: str
    head: TaughtHead
    device: str


@dataclass(frozen=True)
class NamedPhotos:
    """One name's photos as the form holds them: (file name, bytes), and their digest (the features' key)."""

    name: str
    photos: tuple[tuple[str, bytes], ...]
    digest: str


def teach_form(loaded: LoadedModel, weights: str, key: str) -> None:
    """Names and photos, "Learn", the curve, try a photo, save; every widget keyed under `key`."""
    from dlguide_core import teach

    st.caption(f"Teach these weights {teach.MIN_NAMES} to {max_names()} new names: type each name and add "
               f"{teach.MIN_PHOTOS} to {max_photos()} photos of it, then **Learn**. The big model stays frozen; a new "
               f"last layer is learned on its features, and the answers rank your names among its "
               f"{len(loaded.class_names)} classes.")
    count = int(st.number_input("How many names", min_value=teach.MIN_NAMES, max_value=max_names(),
                                value=teach.MIN_NAMES, step=1, key=f"{key}_count"))
    named = [name_and_photos(i, key) for i in range(count)]
    if st.button("Learn", key=f"{key}_learn", type="primary", icon=":material/school:"):
        learn(loaded, weights, named, key)
    lesson = st.session_state.get(f"{key}_lesson")
    if isinstance(lesson, Lesson) and lesson.fingerprint == loaded.fingerprint:
        show_lesson(loaded, lesson, key)


def max_names() -> int:
    from dlguide_core import settings

    return settings.teach_max_names()


def max_photos() -> int:
    from dlguide_core import settings

    return settings.teach_max_photos()


def name_and_photos(i: int, key: str) -> NamedPhotos:
    from dlguide_core import teach
    from dlguide_core.vision.images import UPLOAD_TYPES

    left, right = st.columns([1, 2])
    name = left.text_input(f"Name {i + 1}", max_chars=teach.NAME_MAX_CHARS, key=f"{key}_name_{i}",
                           placeholder="e.g. my mug")
    files = right.file_uploader(f"Photos of name {i + 1}", type=list(UPLOAD_TYPES), accept_multiple_files=True,
                                key=f"{key}_photos_{i}")
    photos = tuple((f.name, f.getvalue()) for f in (files or []))
    digest = hashlib.sha256(b"".join(hashlib.sha256(data).digest() for _, data in photos)).hexdigest()
    return NamedPhotos(name, photos, digest)


def learn(loaded: LoadedModel, weights: str, named: list[NamedPhotos], key: str) -> None:
    """Features of each name's photos (kept per name), then the head; one line for anything wrong, nothing lost."""
    from dlguide_core import booth, teach
    from dlguide_core.errors import DlguideError

    try:
        names = checked(named)
        with st.spinner("Learning a new last layer…"):
            kept = st.session_state.setdefault(f"{key}_features", {})
            outputs = {n.name: name_features(loaded, n, kept) for n in names}
            # only the features of the names on the form stay in this session
            for stale in set(kept) - {(loaded.fingerprint, n.digest) for n in names}:
                del kept[stale]
            head = teach.fit_head(outputs, reference_outputs(loaded))
    except DlguideError as exc:
        st.error(f"Could not learn: {exc}", icon=":material/block:")
        return
    st.session_state[f"{key}_lesson"] = Lesson(loaded.fingerprint, weights, head, booth.device_label(loaded.device))


def checked(named: list[NamedPhotos]) -> list[NamedPhotos]:
    """The form's names, each cleaned (teach.check_name) and distinct, with enough photos (teach.check_enough)."""
    from dlguide_core import teach
    from dlguide_core.errors import UsageError

    names = []
    for i, entry in enumerate(named):
        try:
            name = teach.check_name(entry.name)
        except UsageError as exc:
            raise UsageError(f"name {i + 1}: {exc}") from None
        if len(entry.photos) > max_photos():
            raise UsageError(f"{name} has {len(entry.photos)} photos: at most {max_photos()}")
        names.append(NamedPhotos(name, entry.photos, entry.digest))
    seen = [n.name.casefold() for n in names]
    twice = next((n.name for n in names if seen.count(n.name.casefold()) > 1), None)
    if twice:
        raise UsageError(f"{twice} is named twice: give each thing its own name")
    teach.check_enough({n.name: len(n.photos) for n in names})
    return names


def name_features(loaded: LoadedModel, named: NamedPhotos, kept: dict) -> Outputs:
    """A name's logits and features: kept from an earlier "Learn" when its photos are the same, else one forward
    of its photos in the shared worker."""
    from dlguide_core import teach
    from dlguide_core.vision.images import load_image

    slot = (loaded.fingerprint, named.digest)
    if slot not in kept:
        images = [load_image(data, name=file, min_side=loaded.preset.resize) for file, data in named.photos]
        kept[slot] = classify_task(loaded)(partial(teach.features_of, loaded, images))
        del images
    return kept[slot]


def classify_task(loaded: LoadedModel):
    from dlguide_core.inference.specs import BASELINE
    from ui.cache import classify_task as task

    return task(loaded, BASELINE, "fp32")


@st.cache_resource(show_spinner="Looking at the reference photos (once per model)…", max_entries=4)
def _reference_outputs(fingerprint: str, _loaded: LoadedModel) -> Outputs:
    from dlguide_core import teach

    return classify_task(_loaded)(partial(teach.references, _loaded))


def reference_outputs(loaded: LoadedModel) -> Outputs:
    """The ordinary photos the taught names must not swallow (teach.references), once per model for everyone."""
    return _reference_outputs(loaded.fingerprint, loaded)


def show_lesson(loaded: LoadedModel, lesson: Lesson, key: str) -> None:
    """The loss curve, the one-line explanation, a photo to try, "Save as checkpoint" and "Forget"."""
    from ui.charts import loss_figure

    head = lesson.head
    st.markdown(f"**Learned {len(head.names)} names:** " + ", ".join(f"`{n}`" for n in head.names))
    st.caption("How wrong the new layer still is, step by step (its training loss: lower is better)")
    # plotly's SVG scatter (never WebGL: ui.charts), one point per training step
    st.plotly_chart(loss_figure(list(range(1, len(head.loss) + 1)), list(head.loss), height=220),
                    key=f"{key}_loss", config={"displayModeBar": False})
    st.success(EXPLAIN.format(examples=head.examples, names=len(head.names), ms=head.train_ms,
                              device=lesson.device), icon=":material/school:")
    try_photo(loaded, head, key)
    save_checkpoint(loaded, lesson, key)
    if st.button("Forget what it learned", key=f"{key}_forget", icon=":material/delete:"):
        st.session_state.pop(f"{key}_lesson", None)
        st.session_state.pop(f"{key}_features", None)
        st.rerun()


def try_photo(loaded: LoadedModel, head: TaughtHead, key: str) -> None:
    """Classify photos with the taught names ranked among the model's classes, a taught name marked."""
    from dlguide_core import teach
    from dlguide_core.errors import DlguideError
    from dlguide_core.vision.images import MAX_FILES_PER_UPLOAD, UPLOAD_TYPES, load_image

    files = st.file_uploader("Try it: photos to classify with your names", type=list(UPLOAD_TYPES),
                             accept_multiple_files=True, key=f"{key}_try")
    for i, upload in enumerate((files or [])[:MAX_FILES_PER_UPLOAD]):
        try:
            image = load_image(upload.getvalue(), name=upload.name, min_side=loaded.preset.resize)
            out = classify_task(loaded)(partial(teach.features_of, loaded, [image]))
        except DlguideError as exc:
            st.error(str(exc), icon=":material/block:")
            continue
        (ranked,) = teach.rank(loaded.class_names, head, out.logits, out.features, k=5)
        left, right = st.columns([1, 2])
        left.image(image, caption=upload.name, width="stretch")
        with right:
            first = ranked[0]
            # A name is anyone's text: escaped, never Markdown or HTML
            mark = f" <small>({TAUGHT_MARK})</small>" if first.taught else ""
            st.html(f"<p>I think it's <b>{html.escape(first.label)}</b>{mark}</p>")
            st.dataframe([{"rank": r + 1, "label": p.label, "probability": p.prob,
                           "taught": TAUGHT_MARK if p.taught else ""} for r, p in enumerate(ranked)],
                         hide_index=True, width="stretch", key=f"{key}_try_table_{i}",
                         column_config={"probability": st.column_config.ProgressColumn(
                             "probability", min_value=0.0, max_value=1.0, format="percent")})


def save_checkpoint(loaded: LoadedModel, lesson: Lesson, key: str) -> None:
    """"Save as checkpoint": a dlguide checkpoint in DLGUIDE_HOME/taught/ (then listed under Weights), and its
    download."""
    from dlguide_core import teach
    from dlguide_core.errors import DlguideError
    from dlguide_core.vision.models import taught_dir

    if st.button("Save as checkpoint", key=f"{key}_save", icon=":material/save:"):
        out = taught_dir() / f"taught-{time.strftime('%Y%m%d-%H%M%S')}.pt"
        try:
            st.session_state[f"{key}_saved"] = str(teach.save_taught_checkpoint(loaded, lesson.head, out))
        except (DlguideError, OSError) as exc:
            st.error(f"Could not save the checkpoint: {exc}", icon=":material/block:")
        else:
            st.rerun()  # the Weights picker above lists it from this run on
    saved = st.session_state.get(f"{key}_saved")
    if saved and Path(saved).is_file():
        st.success(f"Saved as {saved}: pick it under **Weights** above, or pass it to `classify --weights`.",
                   icon=":material/check:")
        # read when clicked (a checkpoint is ~100 MB: not held in the session's memory on every rerun)
        st.download_button("Download the checkpoint", lambda: Path(saved).read_bytes(), file_name=Path(saved).name,
                           mime="application/octet-stream", key=f"{key}_download")
