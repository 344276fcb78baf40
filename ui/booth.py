"""Booth mode in the UI: the guard every other page calls first, and the booth page's pieces (its CSS, the
visitor's photo, answer and Grad-CAM, the attract view, the idle reset and the training ticker).
The booth's model, runner and attract view are cached in ui.cache (serve.py warms them); what the booth decides
(its weights, backend, idle timing, attract order) is decided in dlguide_core.booth."""

from __future__ import annotations

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
button[data-variant="segmented_control"] {min-height: 3.6rem; padding: 0.6rem 1.6rem;}
[data-testid="stFileUploaderDropzone"] button p, .stButton button p, [data-testid="stCameraInputButton"] p,
button[data-variant="segmented_control"] p, [data-testid="stToggle"] label p {font-size: 1.4rem;}
.booth-bars {display: flex; flex-direction: column; gap: 0.7rem; margin: 0.5rem 0 1rem;}
.booth-row {display: grid; grid-template-columns: minmax(8rem, 16rem) 1fr 4.5rem; gap: 0.8rem; align-items: center;}
.booth-label {font-size: 1.5rem; font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;}
.booth-track {background: #F3F4F6; border-radius: 0.6rem; height: 2.4rem; overflow: hidden;}
.booth-fill {background: #ED1C24; height: 100%; border-radius: 0.6rem;}
.booth-pct {font-size: 1.5rem; text-align: right;}
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * {white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; overflow-wrap: anywhere;}
[data-testid="stMetricValue"] > div {line-height: 1.15; font-size: clamp(1.2rem, 2.2vw, 2.1rem);}
[data-testid="stImage"] img {max-width: 100%; height: auto;}
@media (max-width: 640px) {
  [data-testid="stHorizontalBlock"]:has(.st-key-kiosk_answer) {flex-direction: column-reverse;}
  .booth-row {grid-template-columns: 1fr 3.2rem; gap: 0.25rem 0.6rem;}
  .booth-label {grid-column: 1 / -1; font-size: 1.15rem; white-space: normal;}
  .booth-track {height: 1.5rem;}
  .booth-pct {font-size: 1.15rem;}
}
</style>"""
CAMERA, UPLOAD = ":material/photo_camera: Camera", ":material/upload: Upload"  # icons need no emoji font
# The booth's widget and session keys keep their "kiosk_" prefix: widget keys are contracts (README, tests).
VISITOR_KEYS_KEPT = {"kiosk_nonce", "kiosk_last_active", "kiosk_job"}  # not visitor data


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


def idle_watchdog(idle_s: float, slot: TimerSlot) -> None:
    """The idle reset, checked in `slot` every `booth.idle_check_s` while this run shows the visitor's photo (not
    every second: an open tab costs a tick's Python, so ticks are few; the caption says the rule, not a count)."""
    from dlguide_core import booth

    slot.claim("countdown")
    with slot.container:
        st.fragment(run_every=booth.idle_check_s(idle_s))(_countdown)(idle_s, slot)


def _countdown(idle_s: float, slot: TimerSlot) -> None:
    from dlguide_core import booth

    if not slot.holds("countdown"):  # a late tick after "Start over": nothing left to clear or count down
        return
    left = booth.seconds_left(st.session_state["kiosk_last_active"], time.monotonic(), idle_s)
    if left <= 0:
        reset_visitor()
        st.rerun(scope="app")
    st.caption(f":material/hourglass_top: This screen clears itself {idle_s:.0f} s after your last tap.")


def attract_view(items: list, slot: TimerSlot) -> None:
    """The bundled samples in turn, in `slot` (every booth screen shows the same one at the same time)."""
    from dlguide_core import booth

    @st.fragment(run_every=booth.ATTRACT_PERIOD_S)
    def view() -> None:
        if not items or not slot.holds("attract"):  # a late tick once a photo is shown
            return
        from dlguide_core.vision.samples import sample_title

        item = items[booth.attract_index(time.time(), len(items))]
        left, right = st.columns([1, 2])
        left.image(item.jpeg, caption=f"Example: {sample_title(item.name)}", width="stretch", output_format="JPEG")
        with right:
            st.markdown("### Show the camera something, or upload a photo!")
            st.markdown(bars_html(item.top), unsafe_allow_html=True)

    slot.claim("attract")
    with slot.container:
        view()


def run_name(job) -> str:
    """The run's name for visitors (never its id): the name people gave it, else its recipe and start time."""
    return job.name or f"{job.recipe}, started {time.strftime('%H:%M', time.localtime(job.created))}"


@st.fragment(run_every=5.0)  # a training step's loss moves slowly; every open tab pays each tick
def loss_ticker(job_id: str, name: str, slot: TimerSlot) -> None:
    from dlguide_core.errors import StoreError
    from ui.cache import existing_job_store
    from ui.charts import loss_figure

    if not slot.holds(job_id):  # a late tick after the run it followed was no longer shown
        return
    store = existing_job_store()
    try:
        steps = store.steps(job_id, extras=False) if store else {"step": [], "loss": []}
    except StoreError:  # the store is away: the booth goes on without its ticker
        steps = {"step": [], "loss": []}
    # A run's name is anyone's text: shown as text (escaped HTML, no Markdown: no links, images or colours)
    st.html(f"<p><b>{html.escape(name)}</b>: how wrong the model still is (its training loss: lower is better)</p>")
    if not steps["step"]:
        st.caption("Waiting for the first training step…")
        return
    st.plotly_chart(loss_figure(steps["step"], steps["loss"]), key="kiosk_ticker_chart",
                    config={"displayModeBar": False, "staticPlot": True})


def training_ticker() -> None:
    """A running job's loss, titled with its name; a choice of run only when several run at once."""
    from dlguide_core.errors import StoreError
    from ui.cache import existing_job_store

    # The same three places in every run, jobs or not: the chart's timer always writes at one place.
    heading, chooser, chart = st.container(), st.container(), timer_slot("kiosk_ticker_chart")
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
    from dlguide_core.vision.images import UPLOAD_TYPES

    source = st.segmented_control("Photo from", [CAMERA, UPLOAD], default=CAMERA, required=True,
                                  key=f"kiosk_source_{nonce()}", label_visibility="collapsed")
    if source == UPLOAD:
        shot = st.file_uploader("Upload a photo", type=list(UPLOAD_TYPES), key=f"kiosk_upload_{nonce()}")
    else:
        shot = st.camera_input("Take a picture", key=f"kiosk_camera_{nonce()}")
    return (shot.name, shot.getvalue()) if shot is not None else None


def classify_visitor(loaded, runner, name: str, data: bytes) -> Visitor | None:
    """The visitor's image and prediction, computed once per photo and kept in session memory."""
    from dlguide_core import booth
    from dlguide_core.errors import DlguideError
    from dlguide_core.vision.gradcam import model_view
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.presets import preprocess

    digest = hashlib.sha256(data).hexdigest()
    visitor = st.session_state.get("kiosk_visitor")
    if visitor is not None and visitor.digest == digest:
        return visitor
    try:
        image = load_image(data, name=name, min_side=loaded.preset.resize)  # never the full resolution
        result = booth.predict_timed(loaded, runner, image)
    except DlguideError as exc:  # a bad image, or the worker could not answer: this visitor only, in one line
        st.error(str(exc), icon=":material/block:")
        return None
    view = model_view(preprocess([image], loaded.preset), loaded.preset)
    # Encoded once here, in this visitor's thread; st.image passes JPEG bytes on as they are on every rerun.
    visitor = Visitor(digest, image, result, photo_jpeg=booth.jpeg_bytes(image), view_jpeg=booth.jpeg_bytes(view))
    st.session_state["kiosk_visitor"] = visitor
    return visitor


def show_visitor(loaded, runner, visitor: Visitor) -> None:
    from dlguide_core import booth
    from dlguide_core.errors import DlguideError
    from dlguide_core.vision.gradcam import grad_cam

    result = visitor.result
    top = result.top[0]
    # Keyed: on a phone the answer's column comes first (CSS), above the camera, so it starts above the fold.
    st.container(key="kiosk_answer").markdown(f"## I think it's a **{html.escape(top.label)}** ({top.prob:.0%})")
    st.markdown(bars_html(result.top), unsafe_allow_html=True)
    a, b, c = st.columns(3)
    a.metric("This prediction took", f"{result.latency_ms:.0f} ms")
    b.metric("Ran on", result.device)
    c.metric("Backend", readable_backend(result.backend))
    st.caption(batch_note(result))
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
    st.subheader("How it works")
    preset = loaded.preset
    one, two, three = st.columns(3)
    one.image(visitor.photo_jpeg, caption="1 · Your photo", width="stretch", output_format="JPEG")
    two.image(visitor.view_jpeg, caption=f"2 · What the model sees: resized to {preset.resize}, centre-cropped to "
                                         f"{preset.crop}×{preset.crop}, colours normalised", width="stretch",
              output_format="JPEG")
    top = visitor.result.top[0]
    three.markdown(f"**3 · The answer**\n\n### {html.escape(top.label)}\n\n{top.prob:.0%} sure, "
                   f"out of the {len(loaded.class_names)} things it knows.")
