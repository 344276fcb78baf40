"""Issue 43, the newcomer's walk, in the app: the fastest line agrees with the throughput chart, run chips carry
names, confirmations stay, missing cells read "—", long details are shown whole, Classify says its upload limits
in text (phones have no tooltip)."""

from __future__ import annotations

import time

import pandas as pd
from streamlit.testing.v1 import AppTest

from tests.support.apptest import open_app


def _table(rows: list[tuple[str, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"runtime": r, "batch_size": b, "p50_ms": p50, "images_per_s": ips}
                         for r, b, p50, ips in rows])


def test_the_fastest_line_names_what_the_throughput_chart_shows() -> None:
    from ui.compiled import fastest_measured

    # ORT's median batch is quicker, but its slow runs make its mean (the chart's images/s) the lower one
    line = fastest_measured(_table([("ONNX Runtime", 8, 40.0, 150.0), ("PyTorch eager", 8, 45.0, 170.0),
                                    ("ONNX Runtime", 1, 5.0, 190.0)]))
    assert line.startswith("Fastest measured here just now: **PyTorch eager** (170.0 images/s at batch 8")
    assert "**ONNX Runtime** has the lowest p50 (40.0 ms)" in line
    agreed = fastest_measured(_table([("ONNX Runtime", 8, 40.0, 190.0), ("PyTorch eager", 8, 45.0, 170.0)]))
    assert "**ONNX Runtime** (190.0 images/s" in agreed and "lowest p50" not in agreed


def test_run_chips_show_names_and_the_id_only_where_two_runs_share_one() -> None:
    from dlguide_core.jobs.store import JobStore
    from ui.live_curves import chip_labels

    store = JobStore()
    a, b, c = (store.create("cifar_net", "pytorch", {}, name=name) for name in ("baseline", "lr sweep", "lr sweep"))
    assert chip_labels([a, b, c]) == {a.id: "baseline", b.id: f"lr sweep ({b.id})", c.id: f"lr sweep ({c.id})"}


def _notice_script() -> None:
    import streamlit as st

    from ui.jobs import kept_message

    if st.session_state.pop("act", False):
        st.session_state["train_notice"] = "Deleted run x."
    st.write(f"shown={kept_message('train_notice')}")


def test_a_confirmation_stays_through_the_panels_next_runs(monkeypatch) -> None:
    at = AppTest.from_function(_notice_script, default_timeout=30)
    at.session_state["act"] = True
    at.run()
    assert at.markdown[-1].value == "shown=Deleted run x."
    at.run()  # the panel's next poll (it used to pop the message: gone in 2-3 s)
    at.run()
    assert at.markdown[-1].value == "shown=Deleted run x."
    monkeypatch.setattr(time, "monotonic", lambda: 1e12)  # long after
    at.run()
    assert at.markdown[-1].value == "shown=None"


def test_a_coloured_table_shows_a_dash_for_a_missing_cell() -> None:
    from ui.status_marks import coloured

    styled = coloured(pd.DataFrame([{"backend": "PyTorch", "available": "yes", "why": None}]), "available")
    assert styled.data["why"].tolist() == ["—"]  # in the data st.dataframe sends, not only in a Styler's format


def test_classify_says_its_upload_limits_in_text() -> None:
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    assert not at.exception
    assert any("marked red in the list" in c.value and " MB" in c.value for c in at.caption)


def _whole_script() -> None:
    from ui.tables import whole_texts

    whole_texts([("short", "fits its cell"), ("long", "x" * 61), ("none", None)])


def test_a_detail_a_cell_would_cut_is_shown_whole_under_the_table() -> None:
    at = AppTest.from_function(_whole_script, default_timeout=30).run()
    assert [c.value for c in at.caption] == [f"**long**: {'x' * 61}"]


def test_the_devices_page_shows_each_long_check_detail_whole() -> None:
    from ui.literal_text import literal

    at = open_app("pages/devices.py")
    assert not at.exception
    checks = next(df.value for df in at.dataframe if tuple(df.value.columns) == ("check", "result", "detail"))
    captions = " ".join(c.value for c in at.caption)
    for name, detail in zip(checks["check"], checks["detail"], strict=True):
        assert len(detail) <= 60 or f"**{literal(name)}**: {detail}" in captions, (name, detail)


def test_the_job_pickers_label_does_not_change_while_the_job_starts_and_runs() -> None:
    """A new label made the picker re-select its job, which closed the list under a click in the job's first
    seconds (its state and an unnamed job's start time changed then)."""
    import os

    from dlguide_core.jobs.store import JobStore
    from ui.job_view import picker_label

    store = JobStore()
    for name in ("lr sweep", None):
        job = store.create("cifar_net", "pytorch", {}, name=name)
        queued = picker_label(store.get(job.id))
        store.claim(job.id, os.getpid())
        assert picker_label(store.get(job.id)) == queued == f"{name or 'cifar_net'} · {job.id}"
        store.finish(job.id, "succeeded")
        assert picker_label(store.get(job.id)) == queued


def test_importing_the_apps_modules_before_the_runtime_logs_nothing() -> None:
    """serve.py imports ui/ before Streamlit's runtime starts: st.cache_data logged "No runtime found" then, on
    every start of the server (issue 43: console noise)."""
    import subprocess
    import sys

    from tests.support.paths import ROOT

    code = ("import importlib, pkgutil, ui\n"
            "for m in pkgutil.iter_modules(ui.__path__): importlib.import_module('ui.' + m.name)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "No runtime found" not in done.stderr, done.stderr


def _bench_script() -> None:
    from dlguide_core.inference.benchmark import BenchRow
    from ui.compiled import show_bench

    show_bench((BenchRow("torch", "cpu", 1, 10.0, 12.0, 100.0, disturbed="1 running job"),
                BenchRow("onnxruntime", "CPUExecutionProvider", 1, 5.0, 6.0, 200.0)), {})


def test_the_benchmark_table_puts_disturbed_by_in_sight_and_a_quiet_row_reads_a_dash() -> None:
    at = AppTest.from_function(_bench_script, default_timeout=60).run()
    assert not at.exception, at.exception
    (table,) = at.dataframe
    assert list(table.value["disturbed"]) == ["1 running job", "—"]
    order = list(table.proto.column_order)
    assert order.index("disturbed") < order.index("p95_ms") and order[:3] == ["runtime", "batch_size", "p50_ms"]
