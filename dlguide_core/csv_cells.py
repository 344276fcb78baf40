"""CSV cells that spreadsheets read as data, never as formulas (OWASP's rule against CSV injection).

A text cell that begins with =, +, -, @, a tab or a carriage return is prefixed with a single quote, so
Excel, LibreOffice and Google Sheets show it instead of evaluating it: a class folder named
`=HYPERLINK(...)` or an upload named `@SUM(...)` stays text. Numbers are written as they are.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import IO, Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """`value`, with a leading single quote when it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeWriter:
    """csv.writer with every cell passed through `safe_cell`."""

    def __init__(self, out: IO[str], **kwargs: Any) -> None:
        self._writer = csv.writer(out, **kwargs)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([safe_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(out: IO[str], **kwargs: Any) -> SafeWriter:
    """A csv.writer over `out` that escapes formula-like text cells."""
    return SafeWriter(out, **kwargs)
