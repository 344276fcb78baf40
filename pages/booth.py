"""Booth: a touch-friendly classify screen for strangers, with Grad-CAM and an attract view.

Visitor photos live in this session's memory only and are dropped (widgets re-keyed,
uploads freed) on "Start over" or after DLGUIDE_KIOSK_IDLE_S seconds without a tap.
The pieces are in ui/booth.py; what the booth decides is in dlguide_core.booth.
A visitor's taps (a photo, "Start over", the heat map) rerun only the visitor's screen (ui.booth.visitor_screen, a
fragment), not this whole page: the title, the styles and the training ticker are drawn once per full run, and
the idle reset is one timer of the page (ui.booth.idle_timer), not one declared with each answer.
"""

import streamlit as st

from dlguide_core import booth
from dlguide_core.errors import DlguideError
from ui.booth import CSS, IDLE_SLOT, idle_timer, training_ticker, visitor_screen
from ui.cache import booth_runner, get_model
from ui.slots import timer_slot

st.html(CSS)
idle_slot = timer_slot(IDLE_SLOT)  # before anything this run may stop at (ui/slots.py)
try:
    loaded = get_model(booth.booth_weights())
    runner = booth_runner(loaded)
except DlguideError as exc:
    st.error(f"The booth model cannot be loaded: {exc}", icon=":material/block:")
    st.stop()

st.title("What does the AI see?")
if not loaded.trained:
    st.warning("Demo without trained weights: the ImageNet weights are not installed on this machine, "
               "so the model is untrained and its guesses are random.", icon=":material/warning:")
visitor_screen(loaded, runner)
with st.container():
    training_ticker()
idle_timer(booth.idle_seconds(), idle_slot)
