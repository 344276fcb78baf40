"""Tables as people read them: a missing value is a dash, not the word None (st.dataframe writes None)."""

from __future__ import annotations

from typing import Any

import pandas as pd

MISSING = "—"


def plain(value: Any) -> str:
    """A cell's text: a whole float without its ".0" (an epoch of a column that has a gap), else as written."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def with_dashes(frame: pd.DataFrame):
    """`frame` styled for st.dataframe: missing cells (None, NaN) read "—"; the data underneath is unchanged."""
    return frame.style.format(plain, na_rep=MISSING)
