"""Booth mode in the UI: the guard every other page calls first, and the booth page's pieces (its CSS, the
visitor's photo, answer and Grad-CAM, the attract view, the idle reset and the training ticker).
The booth's model, runner and attract view are cached in ui.cache (serve.py warms them); what the booth decides
(its weights, backend, idle timing, attract order) is decided in dlguide_core.booth."""

from __future__ import annotations

import base64
import hashlib
import html
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import streamlit as st
from PIL import Image

from ui.slots import TimerSlot, timer_slot

if TYPE_CHECKING:
    from dlguide_core.booth import TimedPrediction
    from dlguide_core.vision.gradcam import GradCam

CSS = """<style>
[data-testid="stFileUploaderDropzone"] {min-height: 9rem; font-size: 1.3rem;}
[data-testid="stFileUploaderDropzone"] button, .stButton button, [data-testid="stCameraInputButton"],
[data-testid="stTab"] {min-height: 3.6rem; padding: 0.6rem 1.6rem;}
[data-testid="stFileUploaderDropzone"] button p, .stButton button p, [data-testid="stCameraInputButton"] p,
[data-testid="stTab"] p, [data-testid="stToggle"] label p {font-size: 1.4rem;}
.booth-bars {display: flex; flex-direction: column; gap: 0.7rem; margin: 0.5rem 0 1rem;}
.booth-row {display: grid; grid-template-columns: minmax(8rem, 16rem) 1fr 4.5rem; gap: 0.8rem; align-items: center;}
.booth-label {font-size: 1.5rem; font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;}
.booth-track {background: #F3F4F6; border-radius: 0.6rem; height: 2.4rem; overflow: hidden;}
.booth-fill {background: #ED1C24; height: 100%; border-radius: 0.6rem;}
.booth-pct {font-size: 1.5rem; text-align: right;}
.booth-answer h2 {padding-top: 0; font-size: clamp(1.6rem, 3vw, 2.4rem); font-weight: 700;}
.booth-attract h3 {font-size: clamp(1.3rem, 2.2vw, 1.8rem); font-weight: 700;}
.booth-how h3 {font-size: 1.6rem; font-weight: 700;}
.booth-metrics {display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 1rem; margin: 0.5rem 0;}
.booth-metric-label {font-size: 0.9rem; color: #4B5563;}
.booth-metric-value {line-height: 1.15; font-size: clamp(1.2rem, 2.2vw, 2.1rem); white-space: normal;
  overflow-wrap: anywhere;}
.booth-note {font-size: 0.9rem; color: #4B5563;}
.booth-how-grid {display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 1rem;}
.booth-attract {display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 2fr); gap: 1rem;}
.booth-how-grid img, .booth-attract img, [data-testid="stImage"] img {width: 100%; max-width: 100%; height: auto;}
.booth-how-grid figure, .booth-attract figure {margin: 0;}
.booth-how-grid figcaption, .booth-attract figcaption {font-size: 0.9rem; color: #4B5563;}
@media (max-width: 640px) {
  [data-testid="stHorizontalBlock"]:has(.booth-answer) {flex-direction: column-reverse;}
  .booth-how-grid, .booth-attract {grid-template-columns: 1fr;}
  .booth-row {grid-template-columns: 1fr 3.2rem; gap: 0.25rem 0.6rem;}
  .booth-label {grid-column: 1 / -1; font-size: 1.15rem; white-space: normal;}
  .booth-track {height: 1.5rem;}
  .booth-pct {font-size: 1.15rem;}
}
</style>"""
CAMERA, UPLOAD = ":material/photo_camera: Camera", ":material/upload: Upload"  # icons need no emoji font
# The booth's widget and session keys keep their "kiosk_" prefix: widget keys are contracts (README, tests).
# The page's timer slots (ui/slots.py): the idle reset and the ticker are claimed by full runs only, so "Start over"
# (a run of the visitor's screen alone) must not forget who holds them.
IDLE_SLOT, ATTRACT_SLOT, TICKER_SLOT = "kiosk_idle", "kiosk_attract", "kiosk_ticker_chart"
VISITOR_KEYS_KEPT = {"kiosk_nonce", "kiosk_last_active", "kiosk_job",  # not visitor data
                     *(f"{slot}_owner" for slot in (IDLE_SLOT, ATTRACT_SLOT, TICKER_SLOT))}


@dataclass(frozen=True)
class Visitor:
    """A visitor's photo (decoded at the model's size, never the full resolution), its prediction
    (booth.TimedPrediction) and, once asked for, its Grad-CAM: session memory only. The pictures shown are
    encoded once per visitor (`*_jpeg`), never again on a rerun."""

    digest: str
    image: Image.Image = field(repr=False, compare=False)
    result: TimedPrediction
    cam: GradCam | None = field(default=None, repr=False, compare=False)
    photo_jpeg: bytes = field(default=b"", repr=False, compare=False)
    view_jpeg: bytes = field(default=b"", repr=False, compare=False)  # what the model sees
    cam_jpeg: bytes = field(default=b"", repr=False, compare=False)


def hide_in_booth() -> None:
    """Defence in depth for booth mode: a non-booth page reached by any route renders nothing."""
    from dlguide_core import settings

    if settings.booth_mode():
        st.info("This page is not available in booth mode.")
        st.stop()


def forget_uploaded_files(files: list) -> None:
    """Free a visitor's uploaded/captured files from Streamlit's in-memory store now, not at session end."""
    ids = [f.file_id for f in files if f is not None and getattr(f, "file_id", None)]
    if not ids:
        return
    from streamlit.runtime import get_instance
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    try:
        manager = get_instance().uploaded_file_mgr
    except RuntimeError:  # no runtime (AppTest): nothing is held beyond the session state just cleared
        return
    for file_id in ids:
        # The runtime's MemoryUploadedFileManager has remove_file; the protocol it is typed as lacks it.
        manager.remove_file(ctx.session_id, file_id)  # type: ignore[attr-defined,union-attr]


def bars_html(top) -> str:
    rows = "".join(
        f'<div class="booth-row"><span class="booth-label">{html.escape(p.label)}</span>'
        f'<div class="booth-track"><div class="booth-fill" style="width:{p.prob * 100:.1f}%"></div></div>'
        f'<span class="booth-pct">{p.prob:.0%}</span></div>'
        for p in top
    )
    return f'<div class="booth-bars">{rows}</div>'


def nonce() -> int:
    return st.session_state.setdefault("kiosk_nonce", 0)


def reset_visitor() -> None:
    """Forget everything the visitor gave us: photos, results, and the widgets that held them."""
    forget_uploaded_files([st.session_state.get(f"kiosk_{w}_{nonce()}") for w in ("upload", "camera")])
    for key in [k for k in st.session_state if str(k).startswith("kiosk_") and k not in VISITOR_KEYS_KEPT]:
        del st.session_state[key]
    st.session_state["kiosk_nonce"] = nonce() + 1  # new widget keys: the old uploader/camera are gone


def idle_timer(idle_s: float, slot: TimerSlot) -> None:
    """The idle reset: every `booth.idle_check_s` a check of the visitor's last tap, declared once per page run in
    `slot` (not with each answer: a fragment declared per visit cost every visit its messages). A tab showing no
    photo checks nothing; the caption beside "Start over" says the rule."""
    from dlguide_core import booth

    slot.claim("idle")
    with slot.container:
        st.fragment(run_every=booth.idle_check_s(idle_s))(_idle_check)(idle_s, slot)


def _idle_check(idle_s: float, slot: TimerSlot) -> None:
    from dlguide_core import booth

    if not slot.holds("idle") or not st.session_state.get("kiosk_photo_shown"):
        return  # a late tick of a page no longer drawn, or nothing to clear: draws nothing either way
    if booth.seconds_left(st.session_state["kiosk_last_active"], time.monotonic(), idle_s) <= 0:
        reset_visitor()
        st.rerun(scope="app")


def data_uri(jpeg: bytes) -> str:
    """A JPEG for an <img> inside the page's HTML: no media file and no second request per picture shown."""
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def attract_view(items: list, slot: TimerSlot) -> None:
    """The bundled samples in turn, in `slot` (every booth screen shows the same one at the same time): one HTML
    element per tick, its picture inline."""
    from dlguide_core import booth

    @st.fragment(run_every=booth.ATTRACT_PERIOD_S)
    def view() -> None:
        if not items or not slot.holds("attract"):  # a late tick once a photo is shown
            return
        from dlguide_core.vision.samples import sample_title

        item = items[booth.attract_index(time.time(), len(items))]
        title = html.escape(f"Example: {sample_title(item.name)}")
        st.html(f'<div class="booth-attract"><figure><img src="{data_uri(item.jpeg)}" alt="{title}">'
                f'<figcaption>{title}</figcaption></figure><div><h3>Show the camera something, or upload a photo!'
                f'</h3>{bars_html(item.top)}</div></div>')

    slot.claim("attract")
    with slot.container:
        view()


@st.fragment
def visitor_screen(loaded, runner) -> None:
    """The visitor's part of the booth: the photo, the answer (or the attract view) and how it works. A fragment:
    a visitor's tap reruns this alone, not the page around it; and it is drawn in few elements (each one a
    message the server's Python handles: about 1 ms of its CPU apiece under a crowd, issue 30's profile)."""
    from dlguide_core import booth
    from ui.cache import attract_items

    st.session_state["kiosk_last_active"] = time.monotonic()  # every run of this screen is a visitor's tap
    controls, stage = st.columns([2, 3], gap="large")
    with stage:
        answer_slot = st.container()
        # The attract view's timer draws here, at the same place in every run (ui/slots.py): a late tick once a
        # photo is shown finds its place still there and draws nothing.
        attract_slot = timer_slot(ATTRACT_SLOT)
    with controls:
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
        with controls:
            # A callback: the photo is dropped before the tap's run, which then draws the fresh screen (one run,
            # not a run that draws the old screen and a second one after st.rerun()).
            st.button("Start over", key=f"kiosk_restart_{nonce()}", width="stretch", icon=":material/restart_alt:",
                      on_click=reset_visitor)
            st.caption(f":material/hourglass_top: This screen clears itself {booth.idle_seconds():.0f} s after "
                       "your last tap.")
        st.session_state["kiosk_last_active"] = time.monotonic()  # the idle time starts once the answer is shown
        st.session_state["kiosk_photo_shown"] = True  # the page's idle timer clears it (reset_visitor forgets this)
    if visitor is not None:
        how_it_works(loaded, visitor)


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


def visitor_photo() -> tuple[str, bytes] | None:
    """The camera and the uploader, in two tabs: switching tabs happens in the browser, without a run of the
    visitor's screen (a choice widget cost every uploading visitor one more run: issue 30). An upload wins over a
    camera shot when a visitor gave both."""
    from dlguide_core.vision.images import UPLOAD_TYPES

    camera_tab, upload_tab = st.tabs([CAMERA, UPLOAD], key=f"kiosk_source_{nonce()}")
    with camera_tab:
        shot = st.camera_input("Take a picture", key=f"kiosk_camera_{nonce()}")
    with upload_tab:
        shot = st.file_uploader("Upload a photo", type=list(UPLOAD_TYPES), key=f"kiosk_upload_{nonce()}") or shot
    return (shot.name, shot.getvalue()) if shot is not None else None


def classify_visitor(loaded, runner, name: str, data: bytes) -> Visitor | None:
    """The visitor's image and prediction, computed once per photo and kept in session memory."""
    from dlguide_core import booth_photos
    from dlguide_core.errors import DlguideError

    digest = hashlib.sha256(data).hexdigest()
    visitor = st.session_state.get("kiosk_visitor")
    if visitor is not None and visitor.digest == digest:
        return visitor
    try:  # decoded, answered and its pictures encoded once here (never again on a rerun)
        answered = booth_photos.answer_photo(loaded, runner, data, name)
    except DlguideError as exc:  # a bad image, or the worker could not answer: this visitor only, in one line
        st.error(str(exc), icon=":material/block:")
        return None
    visitor = Visitor(digest, answered.image, answered.result, photo_jpeg=answered.photo_jpeg,
                      view_jpeg=answered.view_jpeg)
    st.session_state["kiosk_visitor"] = visitor
    return visitor


def show_visitor(loaded, runner, visitor: Visitor) -> None:
    from dlguide_core import booth
    from dlguide_core.errors import DlguideError
    from dlguide_core.vision.gradcam import grad_cam

    result = visitor.result
    top = result.top[0]
    st.html(answer_html(result))  # one element: each one is a message the server handles under the crowd
    if st.toggle(":material/local_fire_department: Where did the model look?", key=f"kiosk_heatmap_{nonce()}"):
        if visitor.cam is None:
            try:  # in the booth's worker, between two batches: others' predictions wait at most this one
                cam = runner.worker.call(lambda: grad_cam(loaded, visitor.image, class_index=top.index))
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")
                return
            visitor = replace(visitor, cam=cam, cam_jpeg=booth.jpeg_bytes(cam.overlay))  # encoded once
            st.session_state["kiosk_visitor"] = visitor
        st.image(visitor.cam_jpeg, caption=heatmap_caption(top.label, loaded.trained), width="stretch",
                 output_format="JPEG")


METRICS = ("This prediction took", "Ran on", "Backend")  # the answer's three figures, in order


def answer_html(result: TimedPrediction) -> str:
    """The answer, its top-5 bars, the three figures and whose photos shared the forward, as one HTML block. Its
    class `booth-answer` puts its column first on a phone (CSS), above the camera, so it starts above the fold."""
    top = result.top[0]
    values = (f"{result.latency_ms:.0f} ms", result.device, readable_backend(result.backend))
    figures = "".join(f'<div class="booth-metric"><div class="booth-metric-label">{label}</div>'
                      f'<div class="booth-metric-value">{html.escape(value)}</div></div>'
                      for label, value in zip(METRICS, values))
    return (f'<div class="booth-answer"><h2>I think it\'s a <b>{html.escape(top.label)}</b> ({top.prob:.0%})</h2>'
            f'{bars_html(result.top)}<div class="booth-metrics">{figures}</div>'
            f'<p class="booth-note">{html.escape(batch_note(result))}</p></div>')


def heatmap_caption(label: str, trained: bool) -> str:
    """What the Grad-CAM shows: where a trained model looked; an untrained model's map means nothing yet."""
    if not trained:
        return (f"Grad-CAM for “{label}”. This model is untrained, so its heat map means nothing yet: a trained "
                f"model's red would show where it looked.")
    return f"Grad-CAM for “{label}”: red is where it looked"


def readable_backend(backend: str) -> str:
    """"ONNX Runtime · CPU" for "ONNX Runtime · CPUExecutionProvider": a word a visitor's screen can wrap."""
    return backend.replace("ExecutionProvider", "")


def batch_note(result: TimedPrediction) -> str:
    """Whose photos shared the model's run with this one (the load bench reads "batch of N")."""
    if result.batch_size <= 1:
        return "The model ran on your photo alone."
    return (f"The model ran on your photo in a batch of {result.batch_size} photos from visitors at this booth "
            f"(waited {result.queued_ms:.0f} ms for its turn).")


def how_it_works(loaded, visitor: Visitor) -> None:
    """Photo, what the model saw and the answer, side by side: one HTML element, the pictures inline."""
    preset = loaded.preset
    seen = (f"2 · What the model sees: resized to {preset.resize}, centre-cropped to {preset.crop}×{preset.crop}, "
            "colours normalised")
    top = visitor.result.top[0]
    st.html(f'<div class="booth-how"><h3>How it works</h3><div class="booth-how-grid">'
            f'<figure><img src="{data_uri(visitor.photo_jpeg)}" alt="Your photo"><figcaption>1 · Your photo'
            f'</figcaption></figure><figure><img src="{data_uri(visitor.view_jpeg)}" alt="What the model sees">'
            f'<figcaption>{seen}</figcaption></figure><div><p><b>3 · The answer</b></p><h3>{html.escape(top.label)}'
            f'</h3><p>{top.prob:.0%} sure, out of the {len(loaded.class_names)} things it knows.</p></div></div></div>')
