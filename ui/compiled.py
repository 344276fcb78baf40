"""The Compiled page's state and readouts: what the page keeps across a visit elsewhere (CompiledState), what
preparing a backend did (export reused from the cache or made now, the .onnx to download), and the benchmark
table with labelled columns, its speed-up and the single-image latency."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dlguide_core.inference.backend_base import BackendOptions
from dlguide_core.inference.bench_job import BenchJob, BenchProgress
from dlguide_core.inference.benchmark import BenchConfig, BenchRow
from dlguide_core.inference.specs import BASELINE, SPEC, quick
from dlguide_core.vision.classify import ImageResult
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.result_files import RunInfo
from ui.slots import TimerSlot
from ui.tables import MISSING

STATE_KEY = "compiled"  # not widget state: Streamlit drops that when another page runs
BENCH_JOB_KEY = "compiled_bench_job"  # this session's benchmark under way (a BenchJob), until its rows are kept
BENCH_POLL_S = 1.0  # how often a running benchmark's status line looks for new rows


@dataclass(frozen=True)
class Prepared:
    """A backend prepared for one model (by fingerprint) with one set of options."""

    fingerprint: str
    backend: str
    options: BackendOptions


@dataclass(frozen=True)
class Classified:
    """The latest image classified through a prepared backend, and what produced it."""

    prepared: Prepared
    image: str
    size: int
    result: ImageResult
    run: RunInfo


@dataclass(frozen=True)
class BenchRun:
    """One benchmark's settings and its rows."""

    fingerprint: str
    backends: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    iters: int
    options: BackendOptions
    rows: tuple[BenchRow, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class CompiledState:
    """What the Compiled page remembers for a session: the model and backend chosen, what each prepared backend
    reported (Backend.describe()), the latest classification (only one: no hoard of decoded images) and the
    latest benchmark."""

    weights: str | None = None
    backend: str | None = None
    prepared: tuple[tuple[Prepared, dict[str, Any]], ...] = ()
    classified: Classified | None = None
    bench: BenchRun | None = None

    def described(self, key: Prepared) -> dict[str, Any] | None:
        return next((info for k, info in self.prepared if k == key), None)

    def with_prepared(self, key: Prepared, info: dict[str, Any]) -> CompiledState:
        return replace(self, prepared=(*[(k, i) for k, i in self.prepared if k != key], (key, info)))


def compiled_state() -> CompiledState:
    state = st.session_state.get(STATE_KEY)
    return state if isinstance(state, CompiledState) else CompiledState()


def remember(**changes) -> CompiledState:
    """The session's CompiledState with `changes`, stored for the next run."""
    state = st.session_state[STATE_KEY] = replace(compiled_state(), **changes)
    return state


def remember_prepared(key: Prepared, info: dict[str, Any]) -> CompiledState:
    state = st.session_state[STATE_KEY] = compiled_state().with_prepared(key, info)
    return state


def prepared_message(info: dict[str, Any]) -> str:
    """What preparing did: the provider, setup, export, compile and .mxr load times."""
    return (f"{info['title']} ready on **{info['provider']}** · setup {info['setup_s']:.2f} s"
            + export_note(info)
            + (f" · compiled in {info['compile_s']:.2f} s" if info.get("compile_s") is not None else "")
            + (f" · compiled in {info['saved_compile_s']:.2f} s when cached" if info.get("saved_compile_s") else "")
            + (f" · .mxr loaded in {info['load_s']:.2f} s" if info.get("load_s") is not None else ""))


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
        "disturbed": st.column_config.TextColumn(
            "Disturbed by", help="What else ran on this machine while this row was measured (other visitors' "
                                 "forwards, running jobs, other processes' CPU load): its latency is then not the "
                                 "backend's own"),
    }


def export_note(info: dict) -> str:
    """How the ONNX file came to be: made by this server (with its time; the Prepare button's precompile makes it
    before the cached backend reads it back, issue 31) or found in the cache from an earlier run."""
    if not info.get("onnx"):
        return ""
    made = info.get("export_s") or info.get("export_made_s")  # this preparation's, or this server's earlier one
    return f" · ONNX export made in {made:.1f} s (cached since)" if made else " · ONNX export reused from cache"


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
    """The "fastest" line at the largest batch measured: the most images/s (the throughput chart's, from the mean
    batch), and the lowest p50 when another runtime has it (issue 43: a p50 headline contradicted the chart)."""
    biggest = table[table["batch_size"] == table["batch_size"].max()]
    biggest = biggest[biggest["images_per_s"].notna() & biggest["p50_ms"].notna()]
    if biggest.empty:
        return ""
    most, quickest = biggest.sort_values("images_per_s", ascending=False).iloc[0], biggest.sort_values("p50_ms").iloc[0]
    line = (f"Fastest measured here just now: **{most['runtime']}** ({most['images_per_s']:.1f} images/s at batch "
            f"{int(most['batch_size'])}, as in the throughput chart; p50 {most['p50_ms']:.1f} ms per batch).")
    if quickest["runtime"] != most["runtime"]:
        line += (f" Its median batch is not the quickest: **{quickest['runtime']}** has the lowest p50 "
                 f"({quickest['p50_ms']:.1f} ms) but slower runs among its others (see p95), so fewer images/s.")
    return line


COLUMN_ORDER = ("runtime", "batch_size", "p50_ms", "images_per_s", "speedup", "disturbed", "p95_ms", "top1_agree",
                "top5_agree", "max_abs_diff", "setup_s", "backend", "provider")  # what a reader compares, first


def show_bench(rows: tuple[BenchRow, ...], titles: dict[str, str]) -> None:
    """A benchmark's rows: each error in a line, the labelled table, the single-image latency, the fastest
    measured and the latency and throughput charts."""
    import plotly.express as px

    from dlguide_core.inference.benchmark import results_table
    from dlguide_core.inference.registry import backend_label

    for row in (r for r in rows if r.error):
        label = titles.get(row.backend, row.backend)
        (st.info if row.unavailable else st.warning)(f"{label}: {row.error}")
    table = pd.DataFrame(results_table(rows))
    if table.empty:
        return
    disturbed = int(table["disturbed"].notna().sum())
    if disturbed:
        st.warning(f"{disturbed} of {len(table)} rows were measured while other work ran on this machine (see "
                   f"*Disturbed by*): their latency is not the backend's own. Run again when it is quiet.",
                   icon=":material/warning:")
    table["disturbed"] = table["disturbed"].fillna(MISSING)  # a quiet row: "—", not the word None
    table.insert(1, "runtime", [backend_label(b, p) for b, p in zip(table["backend"], table["provider"])])
    st.dataframe(table, hide_index=True, key="compiled_bench_table", column_config=bench_columns(),
                 column_order=[c for c in COLUMN_ORDER if c in table.columns])  # "Disturbed by" in sight
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


def record_bench(rows: tuple[BenchRow, ...], precision: str) -> None:
    """Each backend's batch-1 p50 as this machine's measurement (the Classify page's backend help says it)."""
    from dlguide_core.inference import measured

    for row in rows:
        if row.error is None and row.batch_size == 1 and row.p50_ms is not None:
            measured.record(measured.Measurement(row.backend, precision if row.backend != BASELINE else "fp32",
                                                 row.p50_ms, "Compiled benchmark, batch 1"))


def bench_label(name: str, titles: dict[str, str]) -> str:
    """A backend's chip in the benchmark picker: a backend that compiles for minutes says so."""
    title = titles.get(name, name)
    return f"{title} (compiles for minutes)" if not quick(name) else title


def quick_backends(names: list[str]) -> list[str]:
    """The benchmark's default choice: every backend ready in seconds (a minutes-long compile is opt-in)."""
    return [n for n in names if quick(n)]


def slow_backends_help(names: list[str], titles: dict[str, str]) -> str:
    slow = [f"{titles.get(n, n)}: {SPEC[n].slow_setup}" for n in names if not quick(n)]
    return ("Quick backends are chosen by default. Opt-in, because preparing them takes minutes: "
            + "; ".join(slow) + ". PyTorch's torch.compile (Tuning options) too.") if slow else ""


def bench_job() -> BenchJob | None:
    job = st.session_state.get(BENCH_JOB_KEY)
    return job if isinstance(job, BenchJob) else None


def bench_running() -> bool:
    job = bench_job()
    return job is not None and job.progress().running


def start_bench(loaded: LoadedModel, config: BenchConfig, run: BenchRun) -> None:
    """Start `config` on its own thread (never in the script thread: it may take minutes); its rows show as each
    backend finishes (bench_status), and the run is kept with `run`'s settings when it ends."""
    from dlguide_core.inference.activity import watcher
    from dlguide_core.jobs.running_here import running_jobs_here

    st.session_state[BENCH_JOB_KEY] = BenchJob(loaded, config, watch=watcher(running_jobs_here)).start()
    remember(bench=run)


def collect_bench() -> BenchProgress | None:
    """The running benchmark's progress; once it has ended, its rows are kept (CompiledState.bench and this
    machine's measurements) and the job is let go. None when no benchmark ran in this session."""
    job = bench_job()
    if job is None:
        return None
    progress = job.progress()
    last = compiled_state().bench
    if last is not None:
        remember(bench=replace(last, rows=progress.rows))
    if not progress.running:
        del st.session_state[BENCH_JOB_KEY]
        record_bench(progress.rows, job.config.options.precision)
    return progress


def bench_status(slot: TimerSlot) -> None:
    """While this session's benchmark runs: its progress and a Stop button in `slot` (made where no run stops
    above it), redrawn every BENCH_POLL_S; each new row, and the end, rerun the page so its table shows them."""
    job = bench_job()
    if job is None or not job.progress().running:
        return
    slot.claim(id(job))
    with slot.container:
        _bench_status(slot, id(job), len(job.progress().rows))


@st.fragment(run_every=BENCH_POLL_S)
def _bench_status(slot: TimerSlot, owner: int, rows_drawn: int) -> None:
    job = bench_job()
    if job is None or not slot.holds(owner) or id(job) != owner:  # a late tick after the run it followed
        return
    progress = job.progress()
    if not progress.running or len(progress.rows) != rows_drawn:
        st.rerun(scope="app")
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.progress(min(progress.fraction, 1.0), text=f"Benchmark running: {progress.message} "
                                                    f"({len(progress.rows)} row(s) so far, below)")
    if progress.stopped:
        # Stop is checked between timed runs: an ONNX export or a compile under way (seconds to minutes) ends first.
        left.caption("Stopping before the next timed run (an export or compile under way ends first)…")
    elif right.button("Stop", key="compiled_bench_stop", icon=":material/stop_circle:"):
        job.stop()
        st.rerun(scope="fragment")
