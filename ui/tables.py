"""Tables as people read them: a missing value is a dash, not the word None (st.dataframe writes None), and a
text a cell would cut off is shown whole under its table."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
import streamlit as st

from ui.literal_text import literal

MISSING = "—"


def plain(value: Any) -> str:
    """A cell's text: a whole float without its ".0" (an epoch of a column that has a gap), else as written."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def with_dashes(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` for st.dataframe with every missing cell (None, NaN) as "—": a column that has one becomes text
    (issue 43: a Styler's na_rep does not reach a number column in the browser, which drew the word None)."""
    out = frame.copy()
    for column in out.columns:
        if any(missing(v) for v in out[column]):
            out[column] = [MISSING if missing(v) else plain(v) for v in out[column]]
    return out


WHOLE_AFTER = 60  # characters a table cell shows before it cuts a text off


def whole_texts(pairs: Iterable[tuple[str, str | None]]) -> None:
    """Each (name, text) whose text a table cell cuts off, whole and wrapped under the table, as a caption (issue
    43: the Devices page cut its detail cells off, on a phone most of them)."""
    for name, text in pairs:
        if len(text or "") > WHOLE_AFTER:
            st.caption(f"**{literal(name)}**: {text}")  # the name as written; the text is dlguide's own
