"""A download's progress as a Streamlit bar (the ImageNet weights, the datasets), gone once the download ends
either way: a failed download says why in one line, under no bar stuck at "Downloading…"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st


@contextmanager
def download_bar(text: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar showing `text` while inside, and the `(bytes_done, bytes_total or 0)` callback that fills
    it; the bar is removed on the way out (done, failed or rerun)."""
    slot = st.empty()
    bar = slot.progress(0.0, text=text)

    def show(done: int, total: int) -> None:
        bar.progress(min(done / total, 1.0) if total else 0.0, text=text)

    try:
        yield show
    finally:
        slot.empty()
