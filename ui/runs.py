"""Run comparison: the selected runs side by side, with the settings that differ.

The numbers come from dlguide_core.jobs.comparison (as `jobs list --json`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dlguide_core.jobs.comparison import comparison_rows
from dlguide_core.jobs.job import display_name
from ui.durations import duration_text
from ui.tables import with_dashes

HEADINGS = {"final_top1": "top-1 final", "best_top1": "top-1 best", "final_top5": "top-5 final",
            "best_top5": "top-5 best", "final_val_loss": "val loss", "wall_s": "wall time", "images_per_s": "images/s"}


def comparison_table(store, chosen: list, key: str) -> None:
    """One row per selected run: the config fields that differ between them, scores, wall time, images/s."""
    frame = pd.DataFrame(comparison_rows(store, chosen))
    frame.insert(0, "run", [display_name(job) for job in chosen])  # the name people gave it; the id after it
    frame["wall_s"] = frame["wall_s"].map(duration_text)
    frame = frame.round({"final_top1": 2, "best_top1": 2, "final_top5": 2, "best_top5": 2, "final_val_loss": 4,
                         "images_per_s": 1})
    st.dataframe(with_dashes(frame.rename(columns=HEADINGS)), hide_index=True, key=key)
