"""Devices: what PyTorch, ONNX Runtime, MIGraphX and TensorFlow see, and the guide's install checks."""

import pandas as pd
import streamlit as st

from dlguide_core import booth, devices
from dlguide_core.inference.names import MIGRAPHX, ONNXRUNTIME, label
from ui.auth import network_warning
from ui.backends import ort_providers_text, plain_target_error
from ui.cache import device_report
from ui.kiosk import hide_in_kiosk
from ui.status_marks import coloured, mark

hide_in_kiosk()

st.title("Devices")
network_warning()
if st.button("Refresh", key="devices_refresh"):
    device_report.clear()
with st.spinner("Probing devices (TensorFlow is probed in a separate process)…"):
    report = device_report(include_tensorflow=True)

st.subheader(devices.summary_label(report))
cols = st.columns(4)
cols[0].metric("PyTorch", report.torch)
cols[1].metric("Backend", report.backend.upper())
cols[2].metric("HIP" if report.backend == "rocm" else "CUDA", report.hip_version or report.cuda_version or "—")
cols[3].metric("GPUs", len(report.devices))

st.subheader("Install checks (from the guide)")
st.dataframe(coloured(pd.DataFrame([{"check": c.name, "result": mark(c.passed, "pass", "fail"), "detail": c.detail}
                                    for c in report.checks]), "result"), hide_index=True, key="devices_checks")

st.subheader("PyTorch devices")
if report.devices:
    st.dataframe(pd.DataFrame([{"index": g.index, "name": g.name,
                                "memory (GiB)": round(g.total_memory_bytes / 2**30, 1)} for g in report.devices]),
                 hide_index=True, key="devices_gpus")
else:
    st.info("No GPU visible to PyTorch: everything runs on the CPU.")

if report.smi:
    st.subheader("Live readings (rocm-smi / amd-smi)")
    st.dataframe(pd.DataFrame([{
        "gpu": r.index, "utilisation %": r.utilisation_percent, "temperature °C": r.temperature_c,
        "VRAM used (GiB)": None if r.vram_used_bytes is None else round(r.vram_used_bytes / 2**30, 2),
        "VRAM total (GiB)": None if r.vram_total_bytes is None else round(r.vram_total_bytes / 2**30, 1),
        "source": r.source} for r in report.smi]), hide_index=True, key="devices_smi")

st.subheader("Inference runtimes")
st.dataframe(coloured(pd.DataFrame([
    {"runtime": label(MIGRAPHX), "available": mark(report.migraphx), "detail": report.migraphx_detail},
    {"runtime": label(ONNXRUNTIME), "available": mark(bool(report.onnxruntime_providers)),
     "detail": ort_providers_text(report.onnxruntime_providers)},
]), "available"), hide_index=True, key="devices_runtimes")

if report.migraphx_targets:
    st.caption("MIGraphX targets: " + " · ".join(
        f"**{name}**: " + (plain_target_error(name, t["error"]) if t["error"] else
                           ", ".join(t["precisions"]) + (", exhaustive tune" if t["exhaustive_tune"] else ""))
        for name, t in report.migraphx_targets.items()))
st.caption(booth.choice_rule())  # how the booth picks among these (issue 26)

st.subheader("TensorFlow")
tf = report.tensorflow
if tf is None:
    st.info("TensorFlow is not installed (tensorflow-rocm on ROCm hosts, tensorflow-cpu elsewhere).")
elif "error" in tf:
    st.error(tf["error"])
else:
    st.write(f"TensorFlow {tf['version']} (built with ROCm: {tf['built_with_rocm']}, CUDA: {tf['built_with_cuda']})")
    st.dataframe(pd.DataFrame(tf["devices"]), hide_index=True, key="devices_tf")
