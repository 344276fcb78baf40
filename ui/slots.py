"""A place for a part of the page that a timer redraws (a `st.fragment(run_every=...)`), kept at the same place in
every run.

Streamlit may run such a fragment once more after a full run that no longer declared it (its timer fired just
before that run's end reached the browser), as it was declared: at its old place. It forgets a fragment that a
full run did not declare only when that run reaches its end; a run ended by st.stop() (Classify, until an image is
given; the booth) keeps it. If the old place is gone from the page (the run stopped above it, or drew fewer
elements before it), the browser cannot draw there and blanks the whole page ("Bad delta path index"); if it is
another element's place, the fragment draws over that element until the next full run.

A `TimerSlot` is an empty container made before anything a run may skip or stop at, so the place always exists;
the run that declares a fragment in it `claim`s it, and the fragment draws only while it `holds` it: a late run
finds the slot unclaimed (or claimed by another owner) and leaves it empty."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator


@dataclass(frozen=True)
class TimerSlot:
    name: str  # its session-state key's stem: unique on the page
    container: DeltaGenerator

    def claim(self, owner: Hashable) -> None:
        """This run draws `owner`'s fragment here."""
        st.session_state[f"{self.name}_owner"] = owner

    def holds(self, owner: Hashable) -> bool:
        """Whether the latest full run drew `owner`'s fragment here (read in the fragment's own runs)."""
        return st.session_state.get(f"{self.name}_owner") == owner


def timer_slot(name: str) -> TimerSlot:
    """An empty slot, unclaimed until a fragment is declared in it in this run; make it at the same place in
    every full run, before anything that run may skip or stop at."""
    st.session_state.pop(f"{name}_owner", None)
    return TimerSlot(name, st.container())
