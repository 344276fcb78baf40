"""A duration as the pages show it: a job's ETA, a run's wall time."""

from __future__ import annotations

DAY_S = 86400


def duration_text(seconds: float | None) -> str:
    """"00:01:05" under a day, "1.5 days" beyond; "" when there is none yet (None, or NaN in a mixed column)."""
    if seconds is None or seconds != seconds:
        return ""
    if seconds >= DAY_S:
        return f"{seconds / DAY_S:.1f} days"
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}:{s:02d}"
