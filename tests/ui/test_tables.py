"""ui/tables.py: a table never shows the word None (issue 31)."""

from __future__ import annotations

import pandas as pd

from ui.tables import with_dashes


def test_missing_cells_read_as_a_dash_and_numbers_keep_their_text() -> None:
    frame = pd.DataFrame({"epoch": [2, None], "images/s": [41.5, None], "note": ["", None]})
    html = with_dashes(frame).to_html()
    assert "None" not in html and "nan" not in html.lower() and html.count("—") == 3
    assert ">2<" in html and ">41.5<" in html  # the epoch column's floats keep their whole-number text
