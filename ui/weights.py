"""Choosing weights (Classify, Compiled): the weights picker, the ImageNet download offer, the loaded model's
caption, and the guard that stops a page with a one-line reason when the weights cannot load."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dlguide_core.errors import DlguideError
from dlguide_core.vision import architectures
from dlguide_core.vision.models import LoadedModel
from ui.cache import get_model
from ui.progress import download_bar


def weights_caption(loaded: LoadedModel) -> None:
    if loaded.trained:
        st.caption(f"Weights: **{loaded.label}** · {loaded.arch} · {len(loaded.class_names)} classes")
    else:
        st.warning(f"Weights: **{loaded.label}**. This model is untrained: its predictions are noise.",
                   icon=":material/warning:")


def weights_selectbox(key: str, label: str = "Weights", default: str | None = None) -> str:
    """ImageNet, untrained, the other architectures' ImageNet weights, then each job checkpoint found; `default`
    is preselected when it is listed."""
    from dlguide_core.vision.models import available_weights

    options = available_weights()
    runs = checkpoint_runs()
    return st.selectbox(label, options, index=options.index(default) if default in options else 0, key=key,
                        format_func=lambda w: architectures.source_label(w) or checkpoint_label(w, runs))


def checkpoint_runs() -> dict[str, str]:
    """{job id: the run's display name} of the job store, read quietly ({} without one)."""
    from dlguide_core.jobs.job import display_name
    from ui.cache import existing_job_store

    store = existing_job_store()
    try:
        return {j.id: display_name(j) for j in store.list_jobs(refresh=False)} if store else {}
    except DlguideError:
        return {}


def checkpoint_label(weights: str, runs: dict[str, str]) -> str:
    """A job's checkpoint by its run's name, the job id after it ("checkpoint of baseline (20261127-…)"); a file
    no job knows (deleted, another store) by its path."""
    from dlguide_core.vision.models import taught_dir

    job_id = Path(weights).parent.name
    if Path(weights).parent == taught_dir():  # saved by the Teach flow (ui.teach)
        return f"taught on this page: {Path(weights).name}"
    return f"checkpoint of {runs[job_id]} ({job_id})" if job_id in runs else f"checkpoint: {weights}"


def require_weights(weights: str, key_prefix: str, hint: str) -> None:
    """Stop the page when the chosen ImageNet weights are not cached: say where they go and offer a download
    button (`{key_prefix}_download_weights`) with a progress bar. Never downloads on a plain rerun."""
    from dlguide_core.errors import WeightsUnavailable
    from dlguide_core.vision.models import fetch_imagenet_weights, imagenet_weights_path

    named = architectures.parse_source(weights)
    if named is None or named[1] != architectures.IMAGENET or named[0].imagenet is None:
        return
    spec, file = named[0], named[0].imagenet
    path = imagenet_weights_path(spec)
    if path.is_file():
        return
    st.warning(f"The ImageNet weights `{file.filename}` are not cached at `{path}`. Download them here "
               f"(about {file.megabytes} MB), or copy the file from {file.url} to that path.",
               icon=":material/download:")
    if st.button("Download the ImageNet weights", key=f"{key_prefix}_download_weights"):
        try:
            with download_bar(f"Downloading {file.filename}") as progress:
                fetch_imagenet_weights(progress, spec)
            st.rerun()
        except WeightsUnavailable as exc:
            st.error(str(exc), icon=":material/block:")
    st.info(hint)
    st.stop()


def require_model(weights: str, key_prefix: str, hint: str) -> LoadedModel:
    """The cached model for `weights`, captioned; the page stops with a one-line reason when it cannot load."""
    from dlguide_core.errors import DlguideError

    require_weights(weights, key_prefix, hint)
    try:
        loaded = get_model(weights)
    except DlguideError as exc:
        st.error(f"Cannot load these weights: {exc}", icon=":material/block:")
        st.stop()
    weights_caption(loaded)
    return loaded
