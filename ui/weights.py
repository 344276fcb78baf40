"""Choosing weights (Classify, Compiled): the weights picker, the ImageNet download offer, the loaded model's
caption, and the guard that stops a page with a one-line reason when the weights cannot load."""

from __future__ import annotations

import streamlit as st

from dlguide_core.vision.models import LoadedModel
from ui.cache import get_model

WEIGHT_LABELS = {"imagenet": "ImageNet (pretrained)", "none": "none (untrained, random init)"}


def weights_caption(loaded: LoadedModel) -> None:
    if loaded.trained:
        st.caption(f"Weights: **{loaded.label}** · {loaded.arch} · {len(loaded.class_names)} classes")
    else:
        st.warning(f"Weights: **{loaded.label}**. This model is untrained: its predictions are noise.",
                   icon=":material/warning:")


def weights_selectbox(key: str, label: str = "Weights", default: str | None = None) -> str:
    """ImageNet, untrained, then each job checkpoint found; `default` is preselected when it is listed."""
    from dlguide_core.vision.models import available_weights

    options = available_weights()
    return st.selectbox(label, options, index=options.index(default) if default in options else 0, key=key,
                        format_func=lambda w: WEIGHT_LABELS.get(w, f"checkpoint: {w}"))


def require_weights(weights: str, key_prefix: str, hint: str) -> None:
    """Stop the page when the ImageNet weights are not cached: say where they go and offer a download
    button (`{key_prefix}_download_weights`) with a progress bar. Never downloads on a plain rerun."""
    from dlguide_core.errors import WeightsUnavailable
    from dlguide_core.vision.models import (
        IMAGENET_FILENAME,
        IMAGENET_WEIGHTS,
        fetch_imagenet_weights,
        imagenet_weights_path,
    )

    if weights != "imagenet" or imagenet_weights_path().is_file():
        return
    st.warning(f"The ImageNet weights `{IMAGENET_FILENAME}` are not cached at `{imagenet_weights_path()}`. "
               f"Download them here (about 104 MB), or copy the file from {IMAGENET_WEIGHTS.url} to that path.",
               icon=":material/download:")
    if st.button("Download the ImageNet weights", key=f"{key_prefix}_download_weights"):
        bar = st.progress(0.0, text=f"Downloading {IMAGENET_FILENAME}")
        try:
            fetch_imagenet_weights(lambda done, total: bar.progress(min(done / total, 1.0) if total else 0.0))
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
