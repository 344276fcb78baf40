"""Booth mode in the UI: the guard every other page calls first, and the booth page's pieces: the visitor's screen
(a component drawn and run in the browser: ui/booth_screen.js and .css) and the training ticker.

The visitor's screen asks the model through web/booth_api.py (plain HTTP, batched with every other visitor's photo):
a photo, its answer, the heat map, "Start over" and the idle reset cost the server no script run, and an idle
screen (its attract view and countdown run in the browser) costs it nothing at all (issue 30). The texts a visitor
reads are declared here, in Python, and handed to the screen with its data. The booth's model, predictor and attract
view are cached in ui.cache (serve.py warms them); what the booth decides (its weights, backend, idle timing,
attract order) is decided in dlguide_core.booth."""

from __future__ import annotations

import base64
import functools
import html
import time
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from ui.slots import TimerSlot, timer_slot

if TYPE_CHECKING:
    from dlguide_core.booth import Predictor
    from dlguide_core.vision.models import LoadedModel

HERE = Path(__file__).resolve().parent
SCREEN_KEY = "kiosk_screen"  # the screen's element key (widget keys keep the booth's "kiosk_" prefix: a contract)
TICKER_SLOT = "kiosk_ticker_chart"
ATTRACT = "Show the camera something, or upload a photo!"
METRICS = ("This prediction took", "Ran on", "Backend")  # the answer's three figures, in order
BATCH_ALONE = "The model ran on your photo alone."
TAUGHT = "taught just now"  # beside a name this visitor taught, in the answer (tests read it)
# The one line under a taught answer and the loss curve (issue 44): what was learned, from what, how fast, where
LEARNED = ("The big model stayed frozen: a new last layer was learned from your {examples} photos of {names} names, "
           "in {ms} ms on {device}.")
# The load bench and the tests read "batch of N" (bench/bench_kiosk_load.py)
BATCH_SHARED = ("The model ran on your photo in a batch of {n} photos from visitors at this booth (waited {queued} ms "
                "for its turn).")


def hide_in_booth() -> None:
    """Defence in depth for booth mode: a non-booth page reached by any route renders nothing."""
    from dlguide_core import settings

    if settings.booth_mode():
        st.info("This page is not available in booth mode.")
        st.stop()


@functools.cache
def _screen():
    """The visitor's screen, registered once per process on first use (never at import)."""
    return st.components.v2.component("dlguide_booth_screen", css=(HERE / "booth_screen.css").read_text(),
                                      js=(HERE / "booth_screen.js").read_text(), isolate_styles=False)


def visitor_screen(loaded: LoadedModel, predictor: Predictor) -> None:
    """The visitor's part of the booth (the camera and the uploader, the answer or the attract view, how it works,
    "Start over"), drawn and run by the browser: one element per page run, never redrawn by the server."""
    _screen()(data=screen_data(loaded, predictor), key=SCREEN_KEY, width="stretch")


def api_path() -> str:
    """Where the screen posts photos (web/booth_api.py): the booth's routes under the server's base path."""
    from streamlit import config

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}/_booth" if base else "/_booth"


def screen_data(loaded: LoadedModel, predictor: Predictor) -> dict[str, object]:
    """Everything the screen needs, sent once with the page: where to post, the rules, the words, the attract view."""
    from dlguide_core import booth
    from dlguide_core.vision.images import UPLOAD_TYPES
    from dlguide_core.vision.samples import sample_title
    from ui.cache import attract_items

    preset = loaded.preset
    attract = [{"title": f"Example: {sample_title(item.name)}", "src": data_uri(item.jpeg),
                "top": [{"label": p.label, "prob": p.prob} for p in item.top]}
               for item in attract_items(loaded, predictor)]
    idle_s = booth.idle_seconds()
    return {
        "api": api_path(), "idle_s": idle_s, "attract_period_s": booth.ATTRACT_PERIOD_S, "attract": attract,
        "resize": preset.resize, "crop": preset.crop, "classes": len(loaded.class_names),
        "device": predictor.device, "backend": readable_backend(predictor.backend),
        "accept": ",".join(f".{t}" for t in UPLOAD_TYPES), "max_mb": upload_cap() // 2**20,
        "texts": {
            "attract": ATTRACT, "metrics": list(METRICS), "alone": BATCH_ALONE, "shared": BATCH_SHARED,
            "heatmap": heatmap_caption("{label}", loaded.trained),
            "idle": f"This screen clears itself {idle_s:.0f} s after your last tap.",
            "seen": (f"2 · What the model sees: resized to {preset.resize}, centre-cropped to "
                     f"{preset.crop}×{preset.crop}, colours normalised"),
            "known": "out of the {classes} things it knows.",
            "known_taught": "out of the {classes} things it knows and the {taught} you taught it.",
            **teach_texts(),
        },
        "teach": teach_rules(),
    }


def teach_rules() -> dict[str, int]:
    """The Teach tab's rules, as the server enforces them (dlguide_core.teach): the screen only guides by them."""
    from dlguide_core import settings, teach

    return {"min_names": teach.MIN_NAMES, "max_names": settings.teach_max_names(), "min_photos": teach.MIN_PHOTOS,
            "max_photos": settings.teach_max_photos(), "name_chars": teach.NAME_MAX_CHARS}


def teach_texts() -> dict[str, str]:
    """The Teach tab's words ({…} are filled in by the screen)."""
    rules = teach_rules()
    return {
        "taught": TAUGHT, "learned": LEARNED,
        "teach_intro": (f"Teach it something new: name a thing, show it {rules['min_photos']} to "
                        f"{rules['max_photos']} photos of it, do that for {rules['min_names']} to "
                        f"{rules['max_names']} things, then tap Learn."),
        "teach_placeholder": "e.g. my mug",
        "need_name": "Type a name first, then add its photos.",
        "need_names": "Teach {n} more name(s) to start learning.",
        "need_photos": "Each name needs at least {min} photos: add more of “{name}”.",
        "stale": "You added photos since it learned: tap Learn again to use them.",
        "sending": "Sending {n} photo(s)…",
        "learning": "Learning… (a new last layer, on the frozen model's features)",
        "learned_title": "It learned your {names} names",
        "loss": "How wrong the new layer still is, step by step (its training loss: lower is better)",
        "try_it": "Now show it one of them, in the Camera or Upload tab.",
        "forgotten": "Forgotten: nothing you taught is left on the booth.",
        "teach_privacy": (f"Private to this screen: the booth keeps no photo and writes no file, only what the model "
                          f"saw in your photos (numbers) and the new layer, in memory, until you tap Forget, this "
                          f"screen resets, or {forget_after_s():.0f} s without a tap."),
    }


def forget_after_s() -> float:
    """When the server drops a visitor's taught names without a request (dlguide_core.booth_teach)."""
    from dlguide_core.booth import idle_seconds
    from dlguide_core.booth_teach import IDLE_FACTOR

    return IDLE_FACTOR * idle_seconds()


def upload_cap() -> int:
    """The most bytes one photo may have: Streamlit's server.maxUploadSize (MB), at most a photo file's limit."""
    from streamlit import config

    from dlguide_core.vision.images import MAX_FILE_BYTES

    return min(int(config.get_option("server.maxUploadSize")) * 2**20, MAX_FILE_BYTES)


def data_uri(jpeg: bytes) -> str:
    """A JPEG for an <img> inside the page: no media file and no second request per picture shown."""
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def run_name(job) -> str:
    """The run's name for visitors (never its id): the name people gave it, else its recipe and start time."""
    return job.name or f"{job.recipe}, started {time.strftime('%H:%M', time.localtime(job.created))}"


@st.fragment(run_every=5.0)  # a training step's loss moves slowly; every open tab pays each tick
def loss_ticker(job_id: str, name: str, slot: TimerSlot) -> None:
    from dlguide_core.errors import StoreError
    from dlguide_core.jobs.store_url import store_url
    from ui.cache import existing_job_store, ticker_curve
    from ui.charts import loss_figure

    if not slot.holds(job_id):  # a late tick after the run it followed was no longer shown
        return
    try:  # one store read every few seconds for all open tabs, the curve downsampled (ui.cache.ticker_curve)
        steps, losses = ticker_curve(store_url().raw, job_id) if existing_job_store() else ([], [])
    except StoreError:  # the store is away: the booth goes on without its ticker
        steps, losses = [], []
    # A run's name is anyone's text: shown as text (escaped HTML, no Markdown: no links, images or colours)
    st.html(f"<p><b>{html.escape(name)}</b>: how wrong the model still is (its training loss: lower is better)</p>")
    if not steps:
        st.caption("Waiting for the first training step…")
        return
    st.plotly_chart(loss_figure(steps, losses), key="kiosk_ticker_chart",
                    config={"displayModeBar": False, "staticPlot": True})


def training_ticker() -> None:
    """A running job's loss, titled with its name; a choice of run only when several run at once."""
    from dlguide_core.errors import StoreError
    from ui.cache import existing_job_store

    # The same three places in every run, jobs or not: the chart's timer always writes at one place.
    heading, chooser, chart = st.container(), st.container(), timer_slot(TICKER_SLOT)
    store = existing_job_store()
    try:
        running = [j for j in store.list_jobs() if j.status == "running"] if store else []
    except StoreError:  # the store is away: the booth goes on without its ticker
        running = []
    if not running:
        heading.caption("No model is training right now.")
        return
    heading.subheader("Meanwhile, a model is learning")
    job = running[0]  # the newest
    if len(running) > 1:
        with chooser:
            job = st.selectbox("Which run to watch", running, key="kiosk_job", format_func=run_name)
    chart.claim(job.id)
    with chart.container:
        loss_ticker(job.id, run_name(job), chart)


def heatmap_caption(label: str, trained: bool) -> str:
    """What the Grad-CAM shows: where a trained model looked; an untrained model's map means nothing yet."""
    if not trained:
        return (f"Grad-CAM for “{label}”. This model is untrained, so its heat map means nothing yet: a trained "
                f"model's red would show where it looked.")
    return f"Grad-CAM for “{label}”: red is where it looked"


def readable_backend(backend: str) -> str:
    """"ONNX Runtime · CPU" for "ONNX Runtime · CPUExecutionProvider": a word a visitor's screen can wrap."""
    return backend.replace("ExecutionProvider", "")

