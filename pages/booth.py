"""Booth: a touch-friendly classify screen for strangers, with Grad-CAM and an attract view.

Visitor photos live in this session's memory only and are dropped (widgets re-keyed,
uploads freed) on "Start over" or after DLGUIDE_KIOSK_IDLE_S seconds without a tap.
The pieces are in ui/booth.py; what the booth decides is in dlguide_core.booth.
"""

import time

import streamlit as st

from dlguide_core import booth
from dlguide_core.errors import DlguideError
from ui.booth import (
    CSS,
    attract_view,
    classify_visitor,
    how_it_works,
    idle_watchdog,
    nonce,
    reset_visitor,
    show_visitor,
    training_ticker,
    visitor_photo,
)
from ui.cache import attract_items, booth_runner, get_model
from ui.slots import timer_slot

st.html(CSS)
st.session_state["kiosk_last_active"] = time.monotonic()  # every full run is a visitor's tap
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

# Every part of the screen that a timer redraws (the idle countdown, the attract view, the training ticker) has a
# slot made here, at the same place in every run (ui/slots.py): a late tick of a timer this run no longer draws
# finds its place still there and draws nothing.
controls, stage = st.columns([2, 3], gap="large")
with controls:
    photo_slot, restart_slot = st.container(), st.container()
    countdown_slot = timer_slot("kiosk_countdown")
with stage:
    answer_slot = st.container()
    attract_slot = timer_slot("kiosk_attract")
explained_slot, ticker_slot = st.container(), st.container()

with photo_slot:
    photo = visitor_photo()
visitor = None
if photo:
    attract_slot.container.empty()  # at once, not when this run ends: the answer takes the attract view's place
    with answer_slot:
        visitor = classify_visitor(loaded, runner, *photo)
        if visitor is not None:
            show_visitor(loaded, runner, visitor)
if visitor is None:
    attract_view(attract_items(loaded, runner), attract_slot)
if photo is not None:
    with restart_slot:
        # A callback: the photo is dropped before the tap's run, which then draws the fresh screen (one run, not
        # a run that draws the old screen and a second one after st.rerun()).
        st.button("Start over", key=f"kiosk_restart_{nonce()}", width="stretch", icon=":material/restart_alt:",
                  on_click=reset_visitor)
    st.session_state["kiosk_last_active"] = time.monotonic()  # the countdown starts once the answer is shown
    idle_watchdog(booth.idle_seconds(), countdown_slot)
if visitor is not None:
    with explained_slot:
        how_it_works(loaded, visitor)
with ticker_slot:
    training_ticker()
