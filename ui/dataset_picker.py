"""Picking a training dataset (Train page): the data roots' datasets, a download offer when there are none, the
tiny-imagenet val re-organisation, and a browser of class counts and sample images. The finding, fetching and
preparing live in dlguide_core.data (image_folders, tiny_imagenet, cifar10)."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from dlguide_core import settings
from dlguide_core.data import cifar10, image_folders, tiny_imagenet
from dlguide_core.data.class_words import readable_names
from dlguide_core.errors import DlguideError
from ui.progress import download_bar


def roots_signature(roots: list[Path]) -> tuple:
    """What changes when a dataset appears, goes or is prepared: the mtimes of each root, of each folder in it,
    and of their train/ and val/ folders (a few stats per dataset, not a walk over every image)."""
    stamps = []
    for root in roots:
        try:
            entries = [e for e in os.scandir(root) if e.is_dir()]
        except OSError:
            continue
        stamps.append((str(root), root.stat().st_mtime_ns))
        for entry in sorted(entries, key=lambda e: e.name):
            for sub in ("", "train", "val", image_folders.CIFAR10_FOLDER):
                path = Path(entry.path, sub)
                try:
                    stamps.append((str(path), path.stat().st_mtime_ns))
                except OSError:
                    continue
    return tuple(stamps)


@st.cache_resource(show_spinner="Scanning the data roots for datasets…", max_entries=8)  # only read (ui.cache)
def scan_datasets(roots: tuple[str, ...], signature: tuple) -> list[image_folders.DatasetInfo]:
    """The datasets in `roots`, scanned once per `signature` (roots_signature): a rerun costs a few stats."""
    return image_folders.find_datasets([Path(r) for r in roots])


def datasets_in_roots(roots: list[Path]) -> list[image_folders.DatasetInfo]:
    return scan_datasets(tuple(map(str, roots)), roots_signature(roots))


def dataset_label(info: image_folders.DatasetInfo) -> str:
    state = "" if info.ready else " · needs preparing"
    return f"{info.path.name} ({info.kind}, {len(info.classes)} classes, {info.train_count} train images{state})"


def download_section(roots: list) -> None:
    st.info("No dataset found in the data roots "
            f"({', '.join(str(r) for r in roots) or 'none: set DLGUIDE_DATA_ROOTS'}). Download one into "
            "the first root, or copy an ImageFolder (train/<class>/, val/<class>/) there.")
    if not roots or settings.booth_mode():
        return
    left, right = st.columns(2)
    fetchers = {"tiny-imagenet-200 (237 MB)": tiny_imagenet.fetch_tiny_imagenet,
                "CIFAR-10 (163 MB)": cifar10.fetch_cifar10}
    for column, (label, fetch) in zip((left, right), fetchers.items()):
        if column.button(f"Download {label}", key=f"train_download_{label.split()[0]}"):
            try:
                with download_bar(f"Downloading {label}") as progress:
                    fetch(roots[0], progress)
                st.rerun()
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")


def dataset_browser(info: image_folders.DatasetInfo) -> None:
    """Class counts and a few images per class (the guide's show_image), before training on them. Classes show
    their words (tiny-imagenet's words.txt); the class id is in the tooltip."""
    import plotly.graph_objects as go

    ids = list(info.train_counts)
    names = dict(zip(ids, readable_names(info.path, tuple(ids)), strict=True))
    fig = go.Figure(go.Bar(x=[names[i] for i in ids], y=list(info.train_counts.values()), customdata=ids,
                           marker_color="#1f5fbf", hovertemplate="%{x} (%{customdata}): %{y} train images"
                           "<extra></extra>"))
    fig.update_layout(title="Train images per class", height=260, margin=dict(l=10, r=10, t=40, b=10))
    st.plotly_chart(fig, key="train_browse_counts", config={"displayModeBar": False})
    if info.kind != "cifar10" and st.button("Check every image file", key="train_check_files"):
        bad = image_folders.unreadable_files(info)  # a header scan: what training would skip
        if bad.count:
            st.warning(f"{bad.count} unreadable file(s) will be skipped by training: "
                       + "; ".join(bad.examples), icon=":material/broken_image:")
        else:
            st.success("Every image file is readable.", icon=":material/check:")
    samples = (image_folders.cifar_samples(info) if info.kind == "cifar10" else
               {k: [str(p) for p in v] for k, v in image_folders.sample_paths(info).items()})
    for class_id, images in list(samples.items())[:10]:
        if images:
            name = names.get(class_id, class_id)
            st.text(name, help=f"class id: {class_id}")  # a folder's name: text, never Markdown
            st.image(images, caption=[name] * len(images), width=96)


def pick_dataset() -> image_folders.DatasetInfo | None:
    roots = settings.data_roots()
    found = datasets_in_roots(roots)
    if not found:
        download_section(roots)
        return None
    info = st.selectbox("Dataset (from the configured data roots)", found, format_func=dataset_label,
                        key="train_dataset")
    if not info.ready:
        st.warning("This tiny-imagenet copy still has the zip's val/images layout. Prepare it first "
                   "(the guide's val re-organisation; safe to re-run).", icon=":material/folder_open:")
        if st.button("Prepare the val folder", key="train_prepare"):
            try:
                with st.spinner("Moving the val images into class folders…"):
                    report = tiny_imagenet.prepare_tiny_imagenet(info.path)
                scan_datasets.clear()  # its val/ changed: the mtimes say so too, but do not rely on a tick
                st.success(f"Moved {report.moved} images ({report.total} in {report.classes} classes).")
                st.rerun()
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")
        return None
    with st.expander("Browse this dataset", expanded=False):
        if st.toggle("Show class counts and samples", key="train_browse"):
            dataset_browser(info)
    return info
