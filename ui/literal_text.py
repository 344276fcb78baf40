"""A person's text (a run's name, a folder name) inside Streamlit Markdown, shown as typed.

Streamlit renders Markdown in alerts, captions and titles: a run named `[x](http://…)` or `:red[…]` would
become a link or coloured text on every visitor's screen (issue 33, N6). `literal` backslash-escapes every
ASCII punctuation character, which CommonMark shows as the character itself, so nothing in the text is markup.
"""

from __future__ import annotations

import re
import string

_ESCAPES = {ord(c): "\\" + c for c in string.punctuation}


def literal(text: object) -> str:
    """`text` as a Markdown fragment that renders exactly as written (one line: newlines become spaces)."""
    return " ".join(str(text).splitlines()).translate(_ESCAPES)


_BARE_URL = re.compile(r"(?<![`\w])([A-Za-z][A-Za-z0-9+.-]*://[^\s`]*[^\s`.,;:)])")


def unlinked(text: str) -> str:
    """Our own Markdown message with every bare URL in a code span (issue 43: the Ray hint's placeholder
    `http://HEAD:8265` rendered as a link to nowhere); text already in backticks is left as it is."""
    return _BARE_URL.sub(r"`\1`", text)
