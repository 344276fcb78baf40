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

FAST = 2.0  # seconds between reruns while steps arrive: the charts feel live
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


@dataclass(frozen=True)
class PollState:
    interval: float = FAST
    quiet: int = 0
    signature: Hashable = None


def next_poll(state: PollState, signature: Hashable) -> PollState:
    """After one tick that saw `signature`: back to FAST on any change, doubled after QUIET_TICKS quiet ones."""
    if signature != state.signature:
        return PollState(fast_interval(), 0, signature)
    if state.quiet + 1 >= QUIET_TICKS:
        return PollState(min(state.interval * 2, SLOWEST), 0, signature)
    return replace(state, quiet=state.quiet + 1)


def wanted_interval(state: PollState, active: bool) -> float | None:
    return state.interval if active else None


def live_fragment(key: str, body: Callable[[], tuple[bool, Hashable]], active: bool) -> None:
    """Run `body` as a fragment that reruns on a timer only while `active` (as this full run saw it).

    `body()` draws and returns (active, signature) as it sees them now; when that asks for another interval
    (a job ended, or nothing changed for a while) the whole page reruns once to declare it."""
    state = st.session_state.get(f"{key}_poll", PollState())
    if not st.session_state.pop(f"{key}_asked", False):  # the user acted (not a rerun for a new interval): FAST
        state = st.session_state[f"{key}_poll"] = replace(state, interval=fast_interval(), quiet=0)
    registered = wanted_interval(state, active)
    st.session_state[f"{key}_registered"] = registered
    st.session_state[f"{key}_full_run"] = True

    def tick() -> None:
        now_active, signature = body()
        polled = next_poll(st.session_state.get(f"{key}_poll", PollState()), signature)
        st.session_state[f"{key}_poll"] = polled
        if st.session_state.pop(f"{key}_full_run", False):
            return  # declared in this very run: nothing to change
        if wanted_interval(polled, now_active) != st.session_state.get(f"{key}_registered"):
            st.session_state[f"{key}_asked"] = True
            st.rerun()

    st.fragment(tick, run_every=registered)()
