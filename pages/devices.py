"""Devices: what PyTorch, ONNX Runtime, MIGraphX and TensorFlow see, and the guide's install checks.

The page draws at once: the slow probes (MIGraphX, rocm-smi/amd-smi, TensorFlow in a child process) run in the
background (dlguide_core.device_probes.probe_report) and their sections fill in as they finish; the fragment polls
only while one is still running."""

import pandas as pd
import streamlit as st

from dlguide_core import booth, device_probes, devices
from dlguide_core.inference.registry import backend_class
from dlguide_core.inference.specs import MIGRAPHX, ONNXRUNTIME, ZENTORCH, label
from ui.auth import network_warning
from ui.backends import ort_providers_text, plain_target_error
from ui.booth import hide_in_booth
from ui.cache import device_report
from ui.polling import live_fragment
from ui.status_marks import coloured, mark
from ui.tables import whole_texts

hide_in_booth()

st.title("Devices")
network_warning()
refresh = st.button("Refresh", key="devices_refresh")
if refresh:
    device_report.clear()  # the sidebar's label too
probed = device_probes.probe_report(include_tensorflow=True, again=refresh)
report = probed.report

st.subheader(devices.summary_label(report))
cols = st.columns(4)
version, _, build = report.torch.partition("+")  # "2.6.0+rocm6.4.3": the build in the label, whole on a phone too
cols[0].metric(f"PyTorch ({build} build)" if build else "PyTorch", version)
cols[1].metric("Backend", report.backend.upper())
cols[2].metric("HIP" if report.backend == "rocm" else "CUDA", report.hip_version or report.cuda_version or "—")
cols[3].metric("GPUs", len(report.devices))

st.subheader("Install checks (from the guide)")
st.dataframe(coloured(pd.DataFrame([{"check": c.name, "result": mark(c.passed, "pass", "fail"), "detail": c.detail}
                                    for c in report.checks]), "result"), hide_index=True, key="devices_checks",
             column_config={"detail": st.column_config.TextColumn("detail", width="large")})
whole_texts((c.name, c.detail) for c in report.checks)

st.subheader("PyTorch devices")
if report.devices:
    st.dataframe(pd.DataFrame([{"index": g.index, "name": g.name,
                                "memory (GiB)": round(g.total_memory_bytes / 2**30, 1)} for g in report.devices]),
                 hide_index=True)
else:
    st.info("No GPU visible to PyTorch: everything runs on the CPU.")


def probed_sections() -> tuple[bool, frozenset[str]]:
    """The sections the background probes fill in: a 'probing…' line for each one still running."""
    now = device_probes.probe_report(include_tensorflow=True)
    report = now.report
    if device_probes.SMI_PROBE in now.pending:
        st.caption("Live readings (rocm-smi / amd-smi): probing…")
    elif report.smi:
        st.subheader("Live readings (rocm-smi / amd-smi)")
        st.dataframe(pd.DataFrame([{
            "gpu": r.index, "utilisation %": r.utilisation_percent, "temperature °C": r.temperature_c,
            "VRAM used (GiB)": None if r.vram_used_bytes is None else round(r.vram_used_bytes / 2**30, 2),
            "VRAM total (GiB)": None if r.vram_total_bytes is None else round(r.vram_total_bytes / 2**30, 1),
            "source": r.source} for r in report.smi]), hide_index=True, key="devices_smi")

    st.subheader("Inference runtimes")
    ort_row = {"runtime": label(ONNXRUNTIME), "available": mark(bool(report.onnxruntime_providers)),
               "detail": ort_providers_text(report.onnxruntime_providers)}
    if device_probes.MIGRAPHX_PROBE in now.pending:
        st.info("MIGraphX: probing… (loading its library, then a tiny compile for each target)",
                icon=":material/hourglass_top:")
        rows = [ort_row]
    else:
        rows = [{"runtime": label(MIGRAPHX), "available": mark(report.migraphx), "detail": report.migraphx_detail},
                ort_row]
    zentorch = backend_class(ZENTORCH).availability()  # AMD's torch.compile plugin: a runtime too (issue 31)
    rows.append({"runtime": zentorch.title, "available": mark(zentorch.available), "detail": zentorch.reason})
    st.dataframe(coloured(pd.DataFrame(rows), "available"), hide_index=True, key="devices_runtimes",
                 column_config={"detail": st.column_config.TextColumn("detail", width="large")})
    whole_texts((row["runtime"], row["detail"]) for row in rows)  # a cell cuts a long reason off
    if report.migraphx_targets:
        st.caption("MIGraphX targets: " + " · ".join(
            f"**{name}**: " + (plain_target_error(name, t["error"]) if t["error"] else
                               ", ".join(t["precisions"]) + (", exhaustive tune" if t["exhaustive_tune"] else ""))
            for name, t in report.migraphx_targets.items()))
    st.caption(booth.choice_rule())  # how the booth picks among these (issue 26)

    st.subheader("TensorFlow")
    tf = report.tensorflow
    if device_probes.TF_PROBE in now.pending:
        st.info("TensorFlow: probing… (in a separate process, so it never shares GPU memory with PyTorch here)",
                icon=":material/hourglass_top:")
    elif tf is None:
        st.info("TensorFlow is not installed (tensorflow-rocm on ROCm hosts, tensorflow-cpu elsewhere).")
    elif "error" in tf:
        st.error(tf["error"])
    else:
        st.write(f"TensorFlow {tf['version']} (built with ROCm: {tf['built_with_rocm']}, "
                 f"CUDA: {tf['built_with_cuda']})")
        st.dataframe(pd.DataFrame(tf["devices"]), hide_index=True, key="devices_tf")
    return not now.done, now.pending


live_fragment("devices_probes", probed_sections, active=not probed.done)
