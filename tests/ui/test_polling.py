"""ui/polling.py: the Train page's panel polls fast while things change, backs off while they do not, and
never while nothing can change."""

from __future__ import annotations

from ui.polling import (
    CURVES_FAST,
    FAST,
    QUIET_TICKS,
    SLOWEST,
    PollState,
    curves_interval,
    fast_interval,
    next_poll,
    wanted_interval,
)


def test_the_interval_doubles_after_quiet_ticks_up_to_the_slowest_and_resets_on_change() -> None:
    state = next_poll(PollState(), ("job", 1))
    assert state.interval == FAST
    seen = []
    for _ in range(QUIET_TICKS * 6):
        state = next_poll(state, ("job", 1))
        seen.append(state.interval)
    assert seen[QUIET_TICKS - 2] == FAST and seen[QUIET_TICKS - 1] == 2 * FAST
    assert max(seen) == SLOWEST and seen == sorted(seen)
    assert next_poll(state, ("job", 2)).interval == FAST  # a new step: live again


def test_no_timer_at_all_while_nothing_is_queued_or_running() -> None:
    assert wanted_interval(PollState(interval=4.0), active=False) is None
    assert wanted_interval(PollState(interval=4.0), active=True) == 4.0


def test_refresh_interval_comes_from_the_environment_when_it_reads(monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_REFRESH_S", "0.5")
    assert fast_interval() == 0.5 and next_poll(PollState(), ("job", 1)).interval == 0.5
    for wrong in ("soon", "0", "-1"):
        monkeypatch.setenv("DLGUIDE_REFRESH_S", wrong)
        assert fast_interval() == FAST
    monkeypatch.setenv("DLGUIDE_REFRESH_S", "999")
    assert fast_interval() == SLOWEST


def test_the_curves_poll_at_their_own_slower_pace_unless_a_refresh_is_asked_for(monkeypatch) -> None:
    monkeypatch.delenv("DLGUIDE_REFRESH_S", raising=False)
    assert curves_interval() == CURVES_FAST > FAST
    state = next_poll(PollState(), ("job", 1), CURVES_FAST)
    assert state.interval == CURVES_FAST
    for _ in range(QUIET_TICKS):
        state = next_poll(state, ("job", 1), CURVES_FAST)
    assert state.interval == 2 * CURVES_FAST  # backs off from its own pace
    assert next_poll(state, ("job", 2), CURVES_FAST).interval == CURVES_FAST
    monkeypatch.setenv("DLGUIDE_REFRESH_S", "0.5")  # a demo screen, or a test watching many redraws
    assert curves_interval() == 0.5
