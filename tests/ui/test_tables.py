"""ui/tables.py: a table never shows the word None (issue 31)."""

from __future__ import annotations

import pandas as pd

from ui.tables import with_dashes


def test_missing_cells_read_as_a_dash_and_numbers_keep_their_text() -> None:
    frame = pd.DataFrame({"epoch": [2, None], "images/s": [41.5, None], "note": ["", None]})
    shown = with_dashes(frame)
    # the cells themselves (issue 43: a Styler's na_rep never reached a number column in the browser: "None")
    assert shown.to_dict("list") == {"epoch": ["2", "—"], "images/s": ["41.5", "—"], "note": ["", "—"]}
    full = pd.DataFrame({"epoch": [1, 2]})
    assert with_dashes(full)["epoch"].tolist() == [1, 2]  # a column with nothing missing stays a number column
