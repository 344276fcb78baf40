"""TensorFlow widgets: the Classify page's model tabs and the Train page's recipe form (one form: ui.train_form).

Streamlit glue only: data loading, training and prediction live in dlguide_core.training (tf_fashion_mnist,
tf_text, tf_inference) and dlguide_core.data (fashion_mnist, imdb), imported inside the functions so the app
runs without TensorFlow.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui.auth import current_user
from ui.cache import app_job_store, cached_tf_model

# ---------------------------------------------------------------- TensorFlow models on the Classify page

FASHION_RIGHT, FASHION_WRONG, FASHION_OTHER = "#1f5fbf", "#d62728", "#9e9e9e"  # the guide: blue right, red wrong


def _fashion_caption(sample: dict, class_names: list[str]) -> tuple[str, str]:
    probs = sample["probs"]
    predicted = max(range(len(probs)), key=probs.__getitem__)
    text = f"{class_names[predicted]} {probs[predicted]:.0%}"
    if sample.get("label") is None:
        return text, "black"
    return f"{text} ({class_names[sample['label']]})", FASHION_RIGHT if predicted == sample["label"] else FASHION_WRONG


def _fashion_bar_colors(sample: dict) -> list[str]:
    probs, label = sample["probs"], sample.get("label")
    predicted = max(range(len(probs)), key=probs.__getitem__)
    colors = [FASHION_OTHER] * len(probs)
    colors[predicted] = FASHION_WRONG if label is not None else FASHION_RIGHT
    if label is not None:
        colors[label] = FASHION_RIGHT  # drawn last: a right prediction is all blue
    return colors


def fashion_predictions_figure(samples: list[dict], class_names: list[str], cols: int = 3) -> go.Figure:
    """The guide's plot_image + plot_value_array for each sample, `cols` pairs per row."""
    from plotly.subplots import make_subplots

    cols = max(1, min(cols, len(samples)))
    rows = -(-len(samples) // cols)
    fig = make_subplots(rows=rows, cols=2 * cols, column_widths=[1.0, 1.4] * cols, horizontal_spacing=0.03,
                        vertical_spacing=0.5 / rows)
    for i, sample in enumerate(samples):
        row, col = i // cols + 1, 2 * (i % cols) + 1
        caption, color = _fashion_caption(sample, class_names)
        fig.add_trace(go.Heatmap(z=sample["image"], colorscale="Greys", zmin=0, zmax=255, showscale=False,
                                 hovertemplate="x %{x}, y %{y}: %{z}<extra></extra>"), row=row, col=col)
        bare = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="")
        fig.update_xaxes(title_text=caption, title_font=dict(color=color, size=12), title_standoff=4, **bare,
                         row=row, col=col)
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{(row - 1) * 2 * cols + col}", **bare,
                         row=row, col=col)
        fig.add_trace(go.Bar(x=list(class_names), y=sample["probs"], marker_color=_fashion_bar_colors(sample),
                             hovertemplate="%{x}: %{y:.1%}<extra></extra>"), row=row, col=col + 1)
        fig.update_xaxes(showticklabels=len(samples) == 1, tickangle=-45, row=row, col=col + 1)  # names if room
        fig.update_yaxes(range=[0, 1], showticklabels=False, row=row, col=col + 1)
    fig.update_layout(height=300 if len(samples) == 1 else 190 * rows + 30, showlegend=False,
                      margin=dict(l=10, r=10, t=10, b=40))
    return fig


def _pick_tf_model(recipe: str, key: str):
    """A selectbox over the succeeded jobs of `recipe`, or an info box and None."""
    from dlguide_core.tf.inference import finished_models

    infos = finished_models(app_job_store().list_jobs(), recipe)  # the cached store, not a new one
    if not infos:
        st.info(f"No finished `{recipe}` job yet: train one on the Train page, or run "
                f"`python -m dlguide_core train --recipe {recipe} --data DIR`.")
        return None
    return st.selectbox("Trained model (job)", infos, key=key,
                        format_func=lambda m: f"{m.job_id} · test accuracy {m.evaluation['test_accuracy']:.1%}")


def fashion_classify_tab(key: str = "tf_fashion") -> None:
    """A finished tf_fashion_mnist job: the guide's test-image grid, then an uploaded garment."""
    from dlguide_core.errors import DlguideError
    from dlguide_core.tf.configs import FASHION_RECIPE
    from dlguide_core.tf.inference import classify_clothing, clothing_input
    from dlguide_core.vision.images import UPLOAD_TYPES

    info = _pick_tf_model(FASHION_RECIPE, f"{key}_job")
    if info is None:
        return
    names = info.evaluation["class_names"]
    with st.expander("The guide's evaluation: the first test images (blue right, red wrong)"):
        st.plotly_chart(fashion_predictions_figure(info.evaluation["samples"], names), key=f"{key}_grid",
                        config={"displayModeBar": False})
    upload = st.file_uploader("A picture of one garment (it becomes 28x28 grayscale, light on dark)",
                              type=list(UPLOAD_TYPES), key=f"{key}_upload")
    if upload is None:
        st.info("Upload a picture of a garment, shoe or bag.")
        return
    try:
        sample = classify_clothing(cached_tf_model(str(info.model_path), info.version),
                                   clothing_input(upload.getvalue(), name=upload.name))
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
        return
    st.plotly_chart(fashion_predictions_figure([sample], names), key=f"{key}_result", config={"displayModeBar": False})


def review_classify_tab(key: str = "tf_review") -> None:
    """A finished tf_text_classification job: typed reviews -> probability they are positive."""
    from dlguide_core.errors import DlguideError
    from dlguide_core.tf.configs import TEXT_RECIPE
    from dlguide_core.tf.inference import classify_reviews
    from dlguide_core.tf.text import GUIDE_REVIEWS

    info = _pick_tf_model(TEXT_RECIPE, f"{key}_job")
    if info is None:
        return
    text = st.text_area("Movie reviews, one per line", "\n".join(GUIDE_REVIEWS), key=f"{key}_text")
    reviews = [line.strip() for line in text.splitlines() if line.strip()]
    if not reviews:
        st.info("Type a review.")
        return
    try:
        results = classify_reviews(cached_tf_model(str(info.model_path), info.version), reviews)
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
        return
    frame = pd.DataFrame([{"review": t, "positive": round(p, 4), "verdict": "positive" if p >= 0.5 else "negative"}
                          for t, p in results])
    st.dataframe(frame, hide_index=True, width="stretch", key=f"{key}_table",
                 column_config={"positive": st.column_config.ProgressColumn("P(positive)", min_value=0.0,
                                                                           max_value=1.0, format="%.2f")})


def tf_classify_tab(kind: str, key: str) -> None:
    """One TensorFlow model kind on the Classify page ("fashion" or "review"); says why when TF is missing."""
    from dlguide_core.tf.runtime import tensorflow_status

    status = tensorflow_status()
    if not status.available:
        st.info(status.reason)
    elif kind == "fashion":
        fashion_classify_tab(key)
    else:
        review_classify_tab(key)


# ---------------------------------------------------------------- TensorFlow recipes on the Train page

TF_DOWNLOAD = "(download it now: needs the internet)"


def tf_local_copies(recipe: str) -> list[str]:
    """The local copies of `recipe`'s data in the data roots (idx folders, aclImdb trees)."""
    from dlguide_core import settings
    from dlguide_core.tf.configs import local_datasets

    return [str(p) for p in local_datasets(recipe, settings.data_roots())]


def _tf_data_choice(recipe: str) -> str | None:
    """A local copy from the data roots, or "" for the recipe's own download (online only); None when there is
    nothing to train on (the fix is shown) or the pick is refused."""
    from dlguide_core import settings
    from dlguide_core.data.fashion_mnist import FASHION_FILES, FASHION_URL
    from dlguide_core.data.imdb import IMDB_URL
    from dlguide_core.downloads import offline
    from dlguide_core.errors import DlguideError
    from dlguide_core.tf.configs import FASHION_RECIPE

    roots = settings.data_roots()
    found = tf_local_copies(recipe)
    where = roots[0] if roots else "a data root (set DLGUIDE_DATA_ROOTS)"
    what = (f"a folder holding {', '.join(FASHION_FILES.values())} (from {FASHION_URL}), e.g. {where}/fashion-mnist"
            if recipe == FASHION_RECIPE else f"the unpacked aclImdb/ tree of {IMDB_URL}, e.g. {where}/aclImdb")
    if not found and offline():
        st.info(f"No local copy of this recipe's data in the data roots, and this server is offline "
                f"(DLGUIDE_OFFLINE), so it cannot download one. To train it, put {what}; it is listed here "
                "at the next visit.", icon=":material/cloud_off:")
        return None
    st.caption(f"Local copies are looked for in the data roots ({', '.join(map(str, roots)) or 'none'}): {what}.")
    choice = st.selectbox("Data", [*found, *([] if offline() else [TF_DOWNLOAD])], key=f"train_tf_{recipe}_data",
                          help="A local copy in the data roots, or the recipe's own download.")
    if choice == TF_DOWNLOAD:
        return ""
    try:
        return str(settings.resolve_in_roots(choice))
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
        return None


def tf_recipe_form(store, name: str, recipe):
    """A TensorFlow recipe's data pick and fields; the queued job, or None (not submitted, refused, or why
    it cannot run here)."""
    import dataclasses

    from dlguide_core.errors import DlguideError
    from dlguide_core.jobs import queue
    from dlguide_core.tf.runtime import tensorflow_status
    from ui.config_fields import field_input
    from ui.field_help import MAX_STEPS_RULE

    status = tensorflow_status()
    if not status.available:
        st.info(status.reason, icon=":material/extension:")
        return None
    data = _tf_data_choice(name)
    if data is None:
        return None
    with st.form(f"train_tf_form_{name}"):
        columns = st.columns(4)
        fields = [f for f in dataclasses.fields(recipe.config_cls) if f.name != "data"]
        values = {f.name: field_input(columns[i % 4], recipe.config_cls, f.name, f"train_tf_{name}_{f.name}")
                  for i, f in enumerate(fields)}
        st.caption(MAX_STEPS_RULE)
        submitted = st.form_submit_button("Start training", type="primary", key=f"train_tf_{name}_start")
    if not submitted:
        return None
    try:
        return queue.submit(store, name, recipe.make_config(data=data, **values), start=False, owner=current_user())
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
        return None
