"""ui.durations: the one duration format of the Train page (a job's ETA, a run's wall time in the comparison)."""

from __future__ import annotations

from ui.durations import duration_text


def test_a_duration_is_hours_minutes_seconds_under_a_day_and_days_beyond() -> None:
    assert duration_text(65.0) == "00:01:05" and duration_text(3725.4) == "01:02:05"
    assert duration_text(2 * 86400 + 3600) == "2.0 days"
    assert duration_text(None) == "" and duration_text(float("nan")) == ""  # no wall time yet
