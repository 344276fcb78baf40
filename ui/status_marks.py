"""Pass/fail marks that need no emoji font (Debian's chromium, booth screens and Docker images draw ✅/❌ as empty
boxes): a word, coloured green or red in the table."""

from __future__ import annotations

import pandas as pd

from ui.tables import with_dashes

OK_COLOUR, BAD_COLOUR = "#1a7f37", "#cf222e"


def mark(ok: bool, yes: str = "yes", no: str = "no") -> str:
    return yes if ok else no


def coloured(frame: pd.DataFrame, column: str, good: tuple[str, ...] = ("yes", "pass")):
    """`frame` styled: `column`'s good words green and bold, the others red and bold."""
    def colour(value: str) -> str:
        return f"color: {OK_COLOUR if value in good else BAD_COLOUR}; font-weight: 600"

    return with_dashes(frame).style.map(colour, subset=[column])  # a missing cell: "—", not None
