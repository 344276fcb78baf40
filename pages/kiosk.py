"""Booth: a touch-friendly classify screen for strangers, with Grad-CAM and an attract view.

Visitor photos live in this session's memory only and are dropped (widgets re-keyed,
uploads freed) on "Start over" or after DLGUIDE_KIOSK_IDLE_S seconds without a tap.
"""

import hashlib
import html
import time

import streamlit as st

from dlguide_core import booth
from dlguide_core.errors import DlguideError, ImageError, StoreError
from dlguide_core.vision.gradcam import grad_cam, model_view
from dlguide_core.vision.images import UPLOAD_TYPES, load_image
from dlguide_core.vision.models import imagenet_weights_path
from dlguide_core.vision.presets import preprocess
from ui.cache import attract_items, existing_job_store, get_model, kiosk_runner
from ui.charts import loss_figure
from ui.kiosk import forget_uploaded_files

CSS = """<style>
[data-testid="stFileUploaderDropzone"] {min-height: 9rem; font-size: 1.3rem;}
[data-testid="stFileUploaderDropzone"] button, .stButton button, [data-testid="stCameraInputButton"],
button[data-variant="segmented_control"] {min-height: 3.6rem; padding: 0.6rem 1.6rem;}
[data-testid="stFileUploaderDropzone"] button p, .stButton button p, [data-testid="stCameraInputButton"] p,
button[data-variant="segmented_control"] p, [data-testid="stToggle"] label p {font-size: 1.4rem;}
.kiosk-bars {display: flex; flex-direction: column; gap: 0.7rem; margin: 0.5rem 0 1rem;}
.kiosk-row {display: grid; grid-template-columns: minmax(8rem, 16rem) 1fr 4.5rem; gap: 0.8rem; align-items: center;}
.kiosk-label {font-size: 1.5rem; font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;}
.kiosk-track {background: #F3F4F6; border-radius: 0.6rem; height: 2.4rem; overflow: hidden;}
.kiosk-fill {background: #ED1C24; height: 100%; border-radius: 0.6rem;}
.kiosk-pct {font-size: 1.5rem; text-align: right;}
[data-testid="stMetricValue"] > div {white-space: normal; overflow: visible; text-overflow: clip;
  overflow-wrap: anywhere; line-height: 1.15; font-size: clamp(1.2rem, 2.2vw, 2.1rem);}
@media (max-width: 640px) {
  .kiosk-row {grid-template-columns: 1fr 3.2rem; gap: 0.25rem 0.6rem;}
  .kiosk-label {grid-column: 1 / -1; font-size: 1.15rem; white-space: normal;}
  .kiosk-track {height: 1.5rem;}
  .kiosk-pct {font-size: 1.15rem;}
}
</style>"""
CAMERA, UPLOAD = ":material/photo_camera: Camera", ":material/upload: Upload"  # icons need no emoji font
VISITOR_KEYS_KEPT = {"kiosk_nonce", "kiosk_last_active", "kiosk_job"}  # not visitor data


def bars_html(top) -> str:
    rows = "".join(
        f'<div class="kiosk-row"><span class="kiosk-label">{html.escape(p.label)}</span>'
        f'<div class="kiosk-track"><div class="kiosk-fill" style="width:{p.prob * 100:.1f}%"></div></div>'
        f'<span class="kiosk-pct">{p.prob:.0%}</span></div>'
        for p in top
    )
    return f'<div class="kiosk-bars">{rows}</div>'


def reset_visitor() -> None:
    """Forget everything the visitor gave us: photos, results, and the widgets that held them."""
    forget_uploaded_files([st.session_state.get(f"kiosk_{w}_{nonce()}") for w in ("upload", "camera")])
    for key in [k for k in st.session_state if str(k).startswith("kiosk_") and k not in VISITOR_KEYS_KEPT]:
        del st.session_state[key]
    st.session_state.kiosk_nonce = nonce() + 1  # new widget keys: the old uploader/camera are gone


def nonce() -> int:
    return st.session_state.setdefault("kiosk_nonce", 0)


@st.fragment(run_every=1.0)
def idle_watchdog(idle_s: float) -> None:
    left = booth.seconds_left(st.session_state.kiosk_last_active, time.monotonic(), idle_s)
    if left <= 0:
        reset_visitor()
        st.rerun(scope="app")
    st.caption(f":material/hourglass_top: This screen clears itself {left:.0f} s after your last tap.")


@st.fragment(run_every=booth.ATTRACT_PERIOD_S)
def attract_view(items: list) -> None:
    if not items:
        return
    item = items[booth.attract_index(time.time(), len(items))]
    left, right = st.columns([1, 2])
    left.image(item.image, caption=f"Example: {item.name}", width="stretch")
    with right:
        st.markdown("### Show the camera something, or upload a photo!")
        st.markdown(bars_html(item.top), unsafe_allow_html=True)


@st.fragment(run_every=2.0)
def loss_ticker(job_id: str) -> None:
    store = existing_job_store()
    try:
        steps = store.steps(job_id, extras=False) if store else {"step": [], "loss": []}
    except StoreError:  # the store is away: the booth goes on without its ticker
        steps = {"step": [], "loss": []}
    if not steps["step"]:
        st.caption("Waiting for the first training step…")
        return
    st.markdown("**How wrong the model still is** (its training loss: lower is better)")
    st.plotly_chart(loss_figure(steps["step"], steps["loss"]), key="kiosk_ticker_chart",
                    config={"displayModeBar": False, "staticPlot": True})


def training_ticker() -> None:
    store = existing_job_store()
    try:
        running = [j for j in store.list_jobs() if j.status == "running"] if store else []
    except StoreError:  # the store is away: the booth goes on without its ticker
        running = []
    if not running:
        st.caption("No model is training right now.")
        return
    st.subheader("Meanwhile, a model is learning")
    job = st.selectbox("Training run", running, key="kiosk_job",  # the run's name, not a job id
                       format_func=lambda j: j.name or f"{j.recipe}, started {time.strftime('%H:%M', time.localtime(j.created))}")  # noqa: E501
    loss_ticker(job.id)


def visitor_photo() -> tuple[str, bytes] | None:
    source = st.segmented_control("Photo from", [CAMERA, UPLOAD], default=CAMERA, required=True,
                                  key=f"kiosk_source_{nonce()}", label_visibility="collapsed")
    if source == UPLOAD:
        shot = st.file_uploader("Upload a photo", type=list(UPLOAD_TYPES), key=f"kiosk_upload_{nonce()}")
    else:
        shot = st.camera_input("Take a picture", key=f"kiosk_camera_{nonce()}")
    return (shot.name, shot.getvalue()) if shot is not None else None


def classify_visitor(loaded, runner, name: str, data: bytes) -> dict | None:
    """The visitor's image and prediction, computed once per photo and kept in session memory."""
    digest = hashlib.sha256(data).hexdigest()
    visitor = st.session_state.get("kiosk_visitor")
    if visitor and visitor["digest"] == digest:
        return visitor
    try:
        image = load_image(data, name=name, min_side=loaded.preset.resize)  # never the full resolution
    except ImageError as exc:
        st.error(str(exc), icon=":material/block:")
        return None
    visitor = {"digest": digest, "image": image, "result": booth.predict_timed(loaded, runner, image)}
    st.session_state.kiosk_visitor = visitor
    return visitor


def show_visitor(loaded, runner, visitor: dict) -> None:
    result = visitor["result"]
    top = result.top[0]
    st.markdown(f"## I think it's a **{html.escape(top.label)}** ({top.prob:.0%})")
    st.markdown(bars_html(result.top), unsafe_allow_html=True)
    a, b, c = st.columns(3)
    a.metric("This prediction took", f"{result.latency_ms:.0f} ms")
    b.metric("Ran on", result.device)
    c.metric("Backend", result.backend)
    if st.toggle(":material/local_fire_department: Where did the model look?", key=f"kiosk_heatmap_{nonce()}"):
        if "cam" not in visitor:
            with runner.lock:  # one model computation at a time, as for predictions
                visitor["cam"] = grad_cam(loaded, visitor["image"], class_index=top.index)
        st.image(visitor["cam"].overlay, caption=f"Grad-CAM for “{top.label}”: red is where it looked",
                 width=480)


def how_it_works(loaded, visitor: dict) -> None:
    st.subheader("How it works")
    preset = loaded.preset
    one, two, three = st.columns(3)
    one.image(visitor["image"], caption="1 · Your photo", width="stretch")
    view = model_view(preprocess([visitor["image"]], preset), preset)
    two.image(view, caption=f"2 · What the model sees: resized to {preset.resize}, centre-cropped to "
                            f"{preset.crop}×{preset.crop}, colours normalised", width="stretch")
    top = visitor["result"].top[0]
    three.markdown(f"**3 · The answer**\n\n### {html.escape(top.label)}\n\n{top.prob:.0%} sure, "
                   f"out of the {len(loaded.class_names)} things it knows.")


st.html(CSS)
st.session_state.kiosk_last_active = time.monotonic()  # every full run is a visitor's tap
weights = "imagenet" if imagenet_weights_path().is_file() else "none"
try:
    loaded = get_model(weights)
    runner = kiosk_runner(loaded)
except DlguideError as exc:
    st.error(f"The booth model cannot be loaded: {exc}", icon=":material/block:")
    st.stop()

st.title("What does the AI see?")
if not loaded.trained:
    st.warning("Demo without trained weights: the ImageNet weights are not installed on this machine, "
               "so the model is untrained and its guesses are random.", icon=":material/warning:")

controls, stage = st.columns([2, 3], gap="large")
with controls:
    photo = visitor_photo()
with stage:
    visitor = classify_visitor(loaded, runner, *photo) if photo else None
    if visitor is None:
        attract_view(attract_items(loaded, runner))
    else:
        show_visitor(loaded, runner, visitor)
if photo is not None:
    with controls:
        if st.button("Start over", key=f"kiosk_restart_{nonce()}", width="stretch", icon=":material/restart_alt:"):
            reset_visitor()
            st.rerun()
        st.session_state.kiosk_last_active = time.monotonic()  # the countdown starts once the answer is shown
        idle_watchdog(booth.idle_seconds())
if visitor is not None:
    how_it_works(loaded, visitor)
training_ticker()
