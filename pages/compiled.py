"""Compiled inference: export to ONNX, run through ONNX Runtime or MIGraphX, compare with PyTorch."""

import pandas as pd
import plotly.express as px
import streamlit as st

from dlguide_core.errors import DlguideError
from dlguide_core.inference.backend_base import GRAPH_OPTIMIZATIONS, TARGETS, BackendOptions, backend_model
from dlguide_core.inference.benchmark import BenchConfig, results_table, run_benchmark
from dlguide_core.inference.choice import backend_choices, fastest_available, precision_choices, precision_refusals
from dlguide_core.inference.registry import backend_label, backend_status
from dlguide_core.vision.classify import classify_sources
from dlguide_core.vision.images import UPLOAD_TYPES
from dlguide_core.vision.samples import bundled_samples
from ui.cache import get_backend
from ui.compiled import bench_columns, export_note, fastest_measured, onnx_download, single_image_latency
from ui.kiosk import hide_in_kiosk
from ui.results import show_result
from ui.status_marks import coloured, mark
from ui.weights import require_model, weights_selectbox

hide_in_kiosk()

st.title("Compiled inference")
st.caption("The guide's MIGraphX chapter, in the app: export the model to ONNX (dynamic batch, labels inside), "
           "run it with ONNX Runtime or compile it with MIGraphX, and compare latency and agreement with PyTorch.")
# Not widget state: Streamlit drops that when another page runs, and results must survive a visit elsewhere.
state = st.session_state.setdefault("compiled", {"prepared": {}, "classified": {}, "bench": {}, "choice": {}})

weights = weights_selectbox("compiled_weights", "Model", default=state["choice"].get("weights"))
state["choice"]["weights"] = weights
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
remembered = state["choice"].setdefault("backend", fastest.name)
name = left.selectbox("Backend", names, index=names.index(remembered) if remembered in names else 0,
                      key="compiled_backend", format_func=lambda n: titles.get(n, n))
state["choice"]["backend"] = name
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
prepared_key = f"{loaded.fingerprint}|{name}|{options}"

if st.button("Prepare / compile", key="compiled_prepare", type="primary"):
    bar = st.progress(0.0, text="Starting…")
    try:
        backend = get_backend(name, loaded, options, progress=lambda msg, frac: bar.progress(frac, text=msg))
        state["prepared"][prepared_key] = backend.describe().to_json()
        bar.progress(1.0, text="Ready")
    except DlguideError as exc:
        bar.empty()
        st.error(str(exc), icon=":material/block:")
info = state["prepared"].get(prepared_key)
if info:
    st.success(f"{info['title']} ready on **{info['provider']}** · setup {info['setup_s']:.2f} s"
               + export_note(info)
               + (f" · compiled in {info['compile_s']:.2f} s" if info.get("compile_s") is not None else "")
               + (f" · compiled in {info['saved_compile_s']:.2f} s when cached" if info.get("saved_compile_s")
                  else "")
               + (f" · .mxr loaded in {info['load_s']:.2f} s" if info.get("load_s") is not None else ""),
               icon=":material/bolt:")
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
        result_key = f"{prepared_key}|{source[0]}|{len(source[1])}"
        if result_key not in state["classified"]:
            try:
                backend = get_backend(name, loaded, options)
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")
                st.stop()
            # Only the latest result is kept: enough for a revisit, without hoarding decoded images.
            state["classified"] = {result_key: classify_sources(backend_model(loaded, backend), [source], k=5)[0]}
        result = state["classified"][result_key]
        show_result(result, result.decoded, key="compiled_result")

st.subheader("Benchmark against PyTorch eager")
c1, c2, c3 = st.columns(3)
bench_names = c1.multiselect("Backends", names, default=names, key="compiled_bench_backends",
                             format_func=lambda n: titles.get(n, n))
sizes = c2.multiselect("Batch sizes", [1, 8, 32], default=[1, 8], key="compiled_bench_sizes")
iters = c3.slider("Timed runs", 1, 50, 5, key="compiled_bench_iters")
bench_key = f"{loaded.fingerprint}|{sorted(bench_names)}|{sorted(sizes)}|{iters}|{options}"
if st.button("Run benchmark", key="compiled_bench_run", disabled=not (bench_names and sizes)):
    bar = st.progress(0.0, text="Benchmarking…")
    config = BenchConfig(backends=tuple(bench_names), batch_sizes=tuple(sorted(sizes)), iters=iters, warmup=2,
                         options=options)
    rows = run_benchmark(loaded, config, progress=lambda msg, frac: bar.progress(frac, text=msg))
    state["bench"] = {bench_key: rows}
    bar.empty()

rows = state["bench"].get(bench_key)
if rows is None and state["bench"]:
    st.caption("Showing the last benchmark (its settings differ from the ones above).")
    rows = next(iter(state["bench"].values()))
if rows:
    for row in (r for r in rows if r.error):
        label = titles.get(row.backend, row.backend)
        (st.info if row.unavailable else st.warning)(f"{label}: {row.error}")
    table = pd.DataFrame(results_table(rows))
    if not table.empty:
        table.insert(1, "runtime", [backend_label(b, p) for b, p in zip(table["backend"], table["provider"])])
        st.dataframe(table, hide_index=True, key="compiled_bench_table", column_config=bench_columns())
        st.caption(single_image_latency(table))
        st.markdown(fastest_measured(table))
        fig = px.bar(table, x="batch_size", y="p50_ms", color="runtime", barmode="group",
                     hover_data=["provider", "p95_ms", "speedup"], title="Latency per batch (lower is better)",
                     labels={"p50_ms": "p50 latency (ms)", "batch_size": "batch size"})
        st.plotly_chart(fig.update_xaxes(type="category"), key="compiled_bench_latency")
        fig = px.bar(table, x="batch_size", y="images_per_s", color="runtime", barmode="group",
                     labels={"images_per_s": "images/s", "batch_size": "batch size"},
                     title="Throughput (higher is better)")
        st.plotly_chart(fig.update_xaxes(type="category"), key="compiled_bench_throughput")
