"""When the Train page's live panel reruns on its own: only while something can change (a job queued or
running), every FAST seconds while it does change, backing off to SLOWEST while nothing does; never when
every job has ended (then the page reruns only when the user acts, and costs the server nothing).

Streamlit sends a fragment's run_every to the browser when the fragment is declared in a full run, and a full
run drops every timer; so a change of interval is a full rerun (st.rerun), asked for by the fragment itself."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

import streamlit as st

FAST = 2.0  # seconds between reruns while steps arrive: the job table feels live
# The per-step charts poll on their own, slower: a tab redrawing the Train page's six Plotly charts every 2 s cost
# its browser 49-68 % of a core (bench/bench_train_page_browser.py; Plotly 40 % and React 24 % of the renderer),
# whatever the number of points. TensorBoard reloads every 30 s.
CURVES_FAST = 6.0
SLOWEST = 30.0  # a queued job waiting for a slot, a long validation: check now and then
QUIET_TICKS = 3  # unchanged ticks before the interval doubles


def fast_interval() -> float:
    """FAST, or DLGUIDE_REFRESH_S when set (a demo screen, or a test watching a page over many redraws); an
    unreadable or non-positive value is ignored."""
    try:
        value = float(os.environ.get("DLGUIDE_REFRESH_S", FAST))
    except ValueError:
        return FAST
    return min(value, SLOWEST) if value > 0 else FAST


def curves_interval() -> float:
    """CURVES_FAST, or DLGUIDE_REFRESH_S when set (a demo screen or a test that watches many redraws asks for the
    curves at the table's pace too)."""
    return fast_interval() if os.environ.get("DLGUIDE_REFRESH_S") else CURVES_FAST


@dataclass(frozen=True)
class PollState:
    interval: float = FAST
    quiet: int = 0
    signature: Hashable = None


def next_poll(state: PollState, signature: Hashable, fast: float | None = None) -> PollState:
    """After one tick that saw `signature`: back to `fast` (FAST, or DLGUIDE_REFRESH_S) on any change, doubled after
    QUIET_TICKS quiet ones."""
    if signature != state.signature:
        return PollState(fast or fast_interval(), 0, signature)
    if state.quiet + 1 >= QUIET_TICKS:
        return PollState(min(state.interval * 2, SLOWEST), 0, signature)
    return replace(state, quiet=state.quiet + 1)


def wanted_interval(state: PollState, active: bool) -> float | None:
    return state.interval if active else None


def live_fragment(key: str, body: Callable[[], tuple[bool, Hashable]], active: bool,
                  fast: float | None = None) -> None:
    """Run `body` as a fragment that reruns on a timer only while `active` (as this full run saw it), every `fast`
    seconds (default FAST, or DLGUIDE_REFRESH_S) while what it shows changes.

    `body()` draws and returns (active, signature) as it sees them now; when that asks for another interval
    (a job ended, or nothing changed for a while) the whole page reruns once to declare it."""
    fast = fast or fast_interval()
    state = st.session_state.get(f"{key}_poll", PollState())
    if not st.session_state.pop(f"{key}_asked", False):  # the user acted (not a rerun for a new interval): fast
        state = st.session_state[f"{key}_poll"] = replace(state, interval=fast, quiet=0)
    registered = wanted_interval(state, active)
    st.session_state[f"{key}_registered"] = registered
    st.session_state[f"{key}_full_run"] = True

    def tick() -> None:
        now_active, signature = body()
        polled = next_poll(st.session_state.get(f"{key}_poll", PollState()), signature, fast)
        st.session_state[f"{key}_poll"] = polled
        if st.session_state.pop(f"{key}_full_run", False):
            return  # declared in this very run: nothing to change
        if wanted_interval(polled, now_active) != st.session_state.get(f"{key}_registered"):
            st.session_state[f"{key}_asked"] = True
            st.rerun()

    st.fragment(tick, run_every=registered)()
