"""Classify: upload images, use the camera or a sample; Inception v3 top-5 for each."""

from functools import partial

import streamlit as st

from dlguide_core.downloads import DownloadFailed
from dlguide_core.errors import DlguideError
from dlguide_core.inference import measured
from dlguide_core.inference.backend_base import backend_model
from dlguide_core.inference.registry import backend_status
from dlguide_core.inference.specs import BASELINE
from dlguide_core.vision.images import MAX_FILES_PER_UPLOAD, UPLOAD_TYPES
from dlguide_core.vision.result_files import classify_timed, results_csv, results_json
from dlguide_core.vision.samples import GUIDE_DOG_NAME, bundled_samples, fetch_guide_dog
from ui.backends import backend_selectbox, precision_options
from ui.booth import hide_in_booth
from ui.cache import classify_logits, get_backend
from ui.evaluation import evaluation_form
from ui.kept_results import ClassifyInput, classified_once, images_digest
from ui.results import produced_by, show_result
from ui.slots import timer_slot
from ui.teach import teach_form
from ui.tensorflow import tf_classify_tab
from ui.weights import require_model, weights_selectbox

hide_in_booth()

st.title("Classify with Inception v3")
st.caption("The guide's *Evaluating a Pretrained Model*: Resize 299 → CenterCrop 299 → ImageNet "
           "normalisation → softmax → top-5. Models trained by the TensorFlow recipes have their own tabs.")

# A tab per model kind. The TensorFlow tabs are drawn first: the image tab may st.stop() early.
image_tab, fashion_tab, review_tab = st.tabs(["Images · Inception v3 & checkpoints", "Clothing · Fashion-MNIST",
                                              "Movie review · IMDB"])
with fashion_tab:
    tf_classify_tab("fashion", key="tf_fashion")
with review_tab:
    tf_classify_tab("review", key="tf_review")

with image_tab:
    weights = weights_selectbox("classify_weights")
    top_k = st.slider("Top-k", 1, 10, 5, key="classify_topk")
    # A running evaluation job's progress (a 1 s timer redraws it) sits here, above everything that may stop the
    # page: this page ends its runs with st.stop(), so Streamlit may run the timer once more after a run that no
    # longer shows it, at its old place; that place must still be there (ui.slots).
    evaluation_progress = timer_slot("classify_eval_progress")
    loaded = require_model(weights, "classify",
                           "Meanwhile, pick **none (untrained)** above to try the app; its predictions are noise.")
    # "Use the compiled path when the user asks for speed": the same top-k, through ONNX Runtime/MIGraphX.
    titles = {s.name: s.title for s in backend_status()}  # "MIGraphX (CPU)" on a host without an AMD GPU
    backend_name = backend_selectbox("classify_backend", help=measured.summary(titles))
    run_with = loaded  # `loaded` itself stays the eager model for anything else on this page
    precision = "fp32"  # eager PyTorch's
    if backend_name != BASELINE:
        options = precision_options(backend_name, "classify_precision")
        precision = options.precision
        try:
            with st.spinner("Preparing the compiled backend (a one-time ONNX export)…"):
                run_with = backend_model(loaded, get_backend(backend_name, loaded, options))
        except DlguideError as exc:
            st.error(f"Cannot use this backend: {exc}", icon=":material/block:")
            st.stop()

    with st.expander("Evaluate these weights on a dataset (top-1/top-5, confusion matrix, mistakes)"):
        if loaded.trained:
            evaluation_form(weights, "classify_eval", progress=evaluation_progress)
        else:
            st.info("Untrained weights score chance: pick ImageNet or a checkpoint to evaluate.")

    with st.expander("Teach it new names: a few photos of each, a new last layer in a second"):
        teach_form(loaded, weights, "classify_teach")

    upload_tab, camera_tab, sample_tab = st.tabs(["Upload", "Camera", "Sample"])
    sources: list[tuple[str, bytes]] = []
    with upload_tab:
        files = st.file_uploader("Images (jpg, png, webp, bmp, gif)", type=list(UPLOAD_TYPES),
                                 accept_multiple_files=True, key="classify_upload")
        st.caption(f"Each image up to {st.get_option('server.maxUploadSize')} MB, {MAX_FILES_PER_UPLOAD} classified at "
                   "once. The server refuses an upload past what one page, one address or all visitors may hold "
                   "at once: such a file is marked red in the list above (remove one, or try again later).")
        if len(files or []) > MAX_FILES_PER_UPLOAD:
            st.warning(f"{len(files)} files: only the first {MAX_FILES_PER_UPLOAD} are classified.",
                       icon=":material/warning:")
        sources += [(f.name, f.getvalue()) for f in (files or [])[:MAX_FILES_PER_UPLOAD]]
    with camera_tab:
        if st.toggle("Use the camera", key="classify_camera_on"):
            shot = st.camera_input("Take a picture", key="classify_camera")
            if shot is not None:
                sources.append(("camera", shot.getvalue()))
    with sample_tab:
        samples = bundled_samples()
        choice = st.selectbox("Sample image", ["(none)", *samples, GUIDE_DOG_NAME], key="classify_sample")
        if choice == GUIDE_DOG_NAME:
            try:
                sources.append(("dog.jpg", fetch_guide_dog().read_bytes()))
            except DownloadFailed as exc:
                st.warning(f"{exc}. The bundled samples work offline.")
        elif choice in samples:
            sources.append((samples[choice].name, samples[choice].read_bytes()))

    if not sources:
        st.info("Upload one or more images, take a picture, or pick a sample.")
        st.stop()

    # Kept per input: a download click (a rerun) gives the file of the result on screen, without a new forward.
    kept_for = ClassifyInput(images_digest(sources), weights, loaded.fingerprint, backend_name, precision, top_k)
    try:
        with st.spinner(f"Classifying {len(sources)} image(s)…"):
            kept = classified_once(kept_for, partial(classify_timed, run_with, sources, weights=weights,
                                                     backend=backend_name, precision=precision, k=top_k,
                                                     logits=classify_logits(run_with, backend_name, precision)))
    except DlguideError as exc:  # the shared worker could not answer (it stopped, or the forward failed)
        st.error(f"Could not classify: {exc}", icon=":material/block:")
        st.stop()
    results, run = list(kept.results), kept.run
    if kept.fresh:
        measured.record(measured.Measurement(backend_name, precision, run.latency_ms,
                                             f"Classify, {len(sources)} image(s)"))
    csv_col, json_col = st.columns(2)
    csv_col.download_button(f"Download results (CSV, {len(results)} image(s))", results_csv(results, run),
                            file_name="classify_results.csv", mime="text/csv", key="classify_download_csv")
    json_col.download_button(f"Download results (JSON, {len(results)} image(s))", results_json(results, run),
                             file_name="classify_results.json", mime="application/json",
                             key="classify_download_json")
    for i, result in enumerate(results):
        st.subheader(result.image)
        show_result(result, result.decoded, key=f"classify_result_{i}", caption=produced_by(run, titles))
    del results, sources  # drawn: the decoded pixels and the upload copies go now, not at the next rerun
