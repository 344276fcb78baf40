"""A download's progress as a Streamlit bar (the ImageNet weights, the datasets)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st


def download_bar(text: str) -> Callable[[int, int], None]:
    """A progress bar showing `text`, and the `(bytes_done, bytes_total or 0)` callback that fills it."""
    bar = st.progress(0.0, text=text)

    def show(done: int, total: int) -> None:
        bar.progress(min(done / total, 1.0) if total else 0.0)

    return show
