"""Booth: a touch-friendly classify screen for strangers, with Grad-CAM and an attract view.

The visitor's screen (ui.booth.visitor_screen) runs in the browser: a photo goes to the model over HTTP
(web/booth_api.py, batched with the other visitors' photos), and the answer, the heat map, "Start over" and the idle
reset after DLGUIDE_KIOSK_IDLE_S seconds are drawn there, with no script run of this page. The photo lives in the
visitor's browser only (the server keeps nothing once it has answered) and is dropped on "Start over" and on idle.
This script runs once per visit: the title, the screen, and the training ticker (a fragment, while a job runs).
What the booth decides is in dlguide_core.booth.
"""

import html

import streamlit as st

from dlguide_core import booth
from dlguide_core.booth_model import booth_model
from dlguide_core.errors import DlguideError
from ui.booth import training_ticker, visitor_screen
from ui.cache import booth_predictor, get_model

try:
    loaded = get_model(booth.booth_weights())
    predictor = booth_predictor(loaded)
except DlguideError as exc:
    st.error(f"The booth model cannot be loaded: {exc}", icon=":material/block:")
    st.stop()

st.title("What does the AI see?")
if not loaded.trained:
    st.warning("Demo without trained weights: the ImageNet weights are not installed on this machine, "
               "so the model is untrained and its guesses are random.", icon=":material/warning:")
shown = booth_model(loaded)
if shown.from_env or shown.taught_names:  # an operator's model (DLGUIDE_KIOSK_WEIGHTS): the booth says which
    st.html(f'<p class="booth-model">{html.escape(shown.describe())}</p>')  # names are anyone's text: escaped
visitor_screen(loaded, predictor)
with st.container():
    training_ticker()
