"""Status marks need no emoji font: no page or ui module draws an emoji (issue 24, issue 18 point 13)."""

from __future__ import annotations

import re

from tests.support.paths import ROOT
from ui.status_marks import coloured, mark

EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f]")


def test_no_page_or_ui_module_draws_an_emoji() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in [*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py"), ROOT / "app.py"]
             if path.name != "status_marks.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if EMOJI.search(line)]
    assert not found, "\n".join(found)


def test_marks_are_words_coloured_by_outcome() -> None:
    import pandas as pd

    frame = pd.DataFrame({"check": ["a", "b"], "result": [mark(True, "pass", "fail"), mark(False, "pass", "fail")]})
    html = coloured(frame, "result").to_html()
    assert frame["result"].tolist() == ["pass", "fail"]
    assert "#1a7f37" in html and "#cf222e" in html

