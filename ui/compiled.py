"""The Compiled page's readouts: what preparing a backend did (export reused from the cache or made now, the .onnx
to download), and the benchmark table with labelled columns, its speed-up and the single-image latency."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st


def bench_columns() -> dict:
    """The benchmark table's column labels (built when drawn: nothing runs at import)."""
    return {
        "backend": st.column_config.TextColumn("Backend"),
        "runtime": st.column_config.TextColumn("Runtime (provider)"),
        "provider": st.column_config.TextColumn("Execution provider"),
        "batch_size": st.column_config.NumberColumn("Batch size"),
        "p50_ms": st.column_config.NumberColumn("Latency p50 (ms)", format="%.1f", help="Median time of one batch"),
        "p95_ms": st.column_config.NumberColumn("Latency p95 (ms)", format="%.1f", help="95th percentile of one batch"),
        "images_per_s": st.column_config.NumberColumn("Images/s", format="%.1f"),
        "speedup": st.column_config.NumberColumn("Speed-up vs PyTorch eager", format="%.2fx",
                                                 help="p50 of PyTorch eager at this batch size / this p50"),
        "max_abs_diff": st.column_config.NumberColumn("Max |logit diff| vs PyTorch", format="%.2e"),
        "top1_agree": st.column_config.NumberColumn("Top-1 agreement", format="%.3f"),
        "top5_agree": st.column_config.NumberColumn("Top-5 agreement", format="%.3f"),
        "setup_s": st.column_config.NumberColumn("Setup (s)", format="%.2f"),
    }


def export_note(info: dict) -> str:
    """How the ONNX file came to be: made now (with its time) or reused from the cache."""
    if not info.get("onnx"):
        return ""
    return f" · ONNX export {info['export_s']:.1f} s" if info.get("export_s") else " · ONNX export reused from cache"


def onnx_download(info: dict, key: str) -> None:
    """The prepared model's .onnx, read only when the button is clicked (the file is ~100 MB)."""
    path = Path(info["onnx"]) if info.get("onnx") else None
    if path is None or not path.is_file():
        return
    st.download_button(f"Download the ONNX model ({path.stat().st_size / 1e6:.0f} MB)", data=path.read_bytes,
                       file_name=path.name,
                       mime="application/octet-stream", key=key, icon=":material/download:")


def single_image_latency(table: pd.DataFrame) -> str:
    """The batch-1 p50 of each runtime, fastest first ("" without batch-1 rows)."""
    ones = table[table["batch_size"] == 1].sort_values("p50_ms")
    if ones.empty:
        return ""
    return "Single image (batch 1, p50): " + " · ".join(f"{r.runtime} {r.p50_ms:.1f} ms" for r in ones.itertuples())


def fastest_measured(table: pd.DataFrame) -> str:
    """The runtime with the lowest p50 at the largest batch size measured, as the page's "fastest" line."""
    biggest = table[table["batch_size"] == table["batch_size"].max()].sort_values("p50_ms")
    if biggest.empty:
        return ""
    best = biggest.iloc[0]
    return (f"Fastest measured here just now: **{best['runtime']}** ({best['p50_ms']:.1f} ms per batch of "
            f"{int(best['batch_size'])}).")
