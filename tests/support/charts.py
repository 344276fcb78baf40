"""What a page drew with Plotly, read back from an AppTest run."""

from __future__ import annotations

import json


def plotly_charts(at) -> dict[str, dict]:
    """{chart title: figure spec} of every st.plotly_chart the last run drew."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {s["layout"].get("title", {}).get("text", ""): s for s in specs}
