"""Compiled inference: export to ONNX, run through ONNX Runtime or MIGraphX, compare with PyTorch."""


import pandas as pd
import streamlit as st

from dlguide_core.errors import DlguideError
from dlguide_core.inference.backend_base import GRAPH_OPTIMIZATIONS, TARGETS, BackendOptions, backend_model
from dlguide_core.inference.benchmark import BenchConfig
from dlguide_core.inference.choice import backend_choices, fastest_available, precision_choices, precision_refusals
from dlguide_core.inference.registry import backend_status
from dlguide_core.vision.images import UPLOAD_TYPES
from dlguide_core.vision.result_files import classify_timed
from dlguide_core.vision.samples import bundled_samples
from ui.booth import hide_in_booth
from ui.cache import get_backend
from ui.compiled import (
    BenchRun,
    Classified,
    Prepared,
    bench_label,
    bench_running,
    bench_status,
    collect_bench,
    compiled_state,
    onnx_download,
    prepared_message,
    quick_backends,
    remember,
    remember_prepared,
    show_bench,
    slow_backends_help,
    start_bench,
)
from ui.results import produced_by, show_result
from ui.slots import timer_slot
from ui.status_marks import coloured, mark
from ui.weights import require_model, weights_selectbox

hide_in_booth()

st.title("Compiled inference")
st.caption("The guide's MIGraphX chapter, in the app: export the model to ONNX (dynamic batch, labels inside), "
           "run it with ONNX Runtime or compile it with MIGraphX, and compare latency and agreement with PyTorch.")
# A running benchmark's progress and Stop button (redrawn by a timer) live here, above anything that may stop the page.
bench_slot = timer_slot("compiled_bench_status")
# Not widget state: Streamlit drops that when another page runs, and results must survive a visit elsewhere.
weights = weights_selectbox("compiled_weights", "Model", default=compiled_state().weights)
remember(weights=weights)
loaded = require_model(weights, "compiled", "Meanwhile, pick **none (untrained)** or a job checkpoint above: "
                       "latency does not depend on the weights.")

st.subheader("Backends on this machine")
fastest = fastest_available(loaded)
statuses = backend_status()
titles = {s.name: s.title for s in statuses}  # "MIGraphX (CPU)" on a host without an AMD GPU
st.dataframe(coloured(pd.DataFrame([{"backend": s.title, "available": mark(s.available), "why": s.reason}
                                    for s in statuses]), "available"), hide_index=True, key="compiled_status")
st.caption(f"Fastest available here: **{fastest.label}** ({fastest.reason}).")

names = backend_choices()
left, mid, right = st.columns(3)
remembered = compiled_state().backend or fastest.name
name = left.selectbox("Backend", names, index=names.index(remembered) if remembered in names else 0,
                      key="compiled_backend", format_func=lambda n: titles.get(n, n))
remember(backend=name)
target = right.selectbox("Target", TARGETS, key="compiled_target", help="auto: the GPU when one is visible")
precision = mid.selectbox("Precision", precision_choices(name, target), key="compiled_precision",
                          help="fp16 / bf16 / int8 quantisation needs MIGraphX (quantize_fp16 / _bf16 / _int8), "
                               "itself or (fp16, int8) as ONNX Runtime's execution provider; int8 also runs as "
                               "ONNX Runtime's calibrated QDQ model on the CPU.")
refused = {reason: [p for p, r in precision_refusals(name, target).items() if r == reason]
           for reason in precision_refusals(name, target).values()}
for reason, precs in refused.items():
    st.caption(f"Not offered: {', '.join(precs)}: {reason}")
with st.expander("Tuning options"):
    threads = st.number_input("ONNX Runtime intra-op threads (0 = one per physical core)", 0, 256, 0,
                              key="compiled_threads")
    graph_opt = st.selectbox("ONNX Runtime graph optimisation", GRAPH_OPTIMIZATIONS, key="compiled_graph_opt")
    tune = st.checkbox("MIGraphX exhaustive tuning (much slower compile, faster kernels)", key="compiled_tune")
    use_compile = st.checkbox("PyTorch: torch.compile (inductor; minutes on a CPU)", key="compiled_torch_compile")
    st.caption("For MIOpen's own convolution tuning, start the app with `MIOPEN_FIND_ENFORCE=3` "
               "(see docs/ARCHITECTURE.md, *Inference backends*). A `.mxr` compiled with `migraphx-driver` "
               "from the ONNX export is used when placed at the *.mxr* path shown once prepared "
               "(or passed to `bench --mxr`).")
options = BackendOptions(precision=precision, target=target, exhaustive_tune=tune, intra_op_threads=int(threads),
                         graph_optimization=graph_opt, torch_compile="inductor" if use_compile else None)
prepared_key = Prepared(loaded.fingerprint, name, options)

if st.button("Prepare / compile", key="compiled_prepare", type="primary"):
    bar = st.progress(0.0, text="Starting…")
    try:
        backend = get_backend(name, loaded, options, progress=lambda msg, frac: bar.progress(frac, text=msg))
        remember_prepared(prepared_key, backend.describe().to_json())
        bar.progress(1.0, text="Ready")
    except DlguideError as exc:
        bar.empty()
        st.error(str(exc), icon=":material/block:")
info = compiled_state().described(prepared_key)
if info:
    st.success(prepared_message(info), icon=":material/bolt:")
    if info.get("mxr"):
        st.caption(f"Compiled program: `{info['mxr']}`")
    onnx_download(info, "compiled_onnx_download")

st.subheader("Classify through this backend")
if not info:
    st.info("Prepare the backend first (the button above).")
else:
    files = st.file_uploader("Image", type=list(UPLOAD_TYPES), key="compiled_upload")
    samples = bundled_samples()
    sample = st.selectbox("…or a sample", ["(none)", *samples], key="compiled_sample")
    source = (files.name, files.getvalue()) if files else (
        (samples[sample].name, samples[sample].read_bytes()) if sample in samples else None)
    if source:
        seen = compiled_state().classified
        if seen is None or (seen.prepared, seen.image, seen.size) != (prepared_key, source[0], len(source[1])):
            try:
                backend = get_backend(name, loaded, options)
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")
                st.stop()
            results, run = classify_timed(backend_model(loaded, backend), [source], weights=weights, backend=name,
                                          precision=precision, k=5)
            # Only the latest result is kept: enough for a revisit, without hoarding decoded images.
            seen = Classified(prepared_key, source[0], len(source[1]), results[0], run)
            remember(classified=seen)
        show_result(seen.result, seen.result.decoded, key="compiled_result", caption=produced_by(seen.run, titles))

st.subheader("Benchmark against PyTorch eager")
bench_names = st.multiselect("Backends", names, default=quick_backends(names), key="compiled_bench_backends",
                             format_func=lambda n: bench_label(n, titles),  # the whole width: every chip in sight
                             help=slow_backends_help(names, titles))
c2, c3 = st.columns(2)
sizes = c2.multiselect("Batch sizes", [1, 8, 32], default=[1, 8], key="compiled_bench_sizes")
iters = c3.slider("Timed runs", 1, 50, 5, key="compiled_bench_iters")
bench_run = BenchRun(loaded.fingerprint, tuple(sorted(bench_names)), tuple(sorted(sizes)), iters, options)
# It runs on its own thread: rows appear as each backend finishes, and Stop (at the top) ends it.
if st.button("Run benchmark", key="compiled_bench_run", disabled=not (bench_names and sizes) or bench_running()):
    config = BenchConfig(backends=tuple(bench_names), batch_sizes=tuple(sorted(sizes)), iters=iters, warmup=2,
                         options=options)
    start_bench(loaded, config, bench_run)
progress = collect_bench()
bench_status(bench_slot)
if progress is not None and progress.running:
    st.caption(f"Running: {progress.message} The rows so far are below; Stop is at the top of the page.")
if progress is not None and progress.error:
    st.error(f"The benchmark failed: {progress.error}", icon=":material/block:")
if progress is not None and progress.stopped and not progress.running:
    st.info(f"Stopped: {len(progress.rows)} row(s) were measured before it stopped.", icon=":material/stop_circle:")

last = compiled_state().bench
if last is not None and last != bench_run:
    st.caption("Showing the last benchmark (its settings differ from the ones above).")
if last is not None and last.rows:
    show_bench(last.rows, titles)
