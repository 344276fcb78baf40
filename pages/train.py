"""Train: pick a recipe and a dataset, start a background job, watch its curves live.

Jobs run in their own processes (they survive closing the tab or restarting the
app); this page only writes requests to the job store and reads metrics from it.
"""

import time
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dlguide_core import settings
from dlguide_core.data import datasets
from dlguide_core.errors import DistributedError, DlguideError
from dlguide_core.jobs import launch, queue
from dlguide_core.jobs.store import ACTIVE, RESUMABLE, Job, db_path
from dlguide_core.training.diagnostics import training_warnings
from dlguide_core.training.metrics import downsample, stride
from dlguide_core.training.recipes import AMP_DTYPE_FLAGS, is_training, recipes
from dlguide_core.vision.models import job_checkpoints
from pages.common import curve_figure, hide_in_kiosk, job_store, training_loss_figure
from pages.evaluation_ui import evaluation_form
from pages.runs_ui import comparison_table
from pages.tensorflow_ui import tf_train_section

hide_in_kiosk()

st.title("Train")
st.caption("The guide's recipes as background jobs: Inception v3 fine-tuning on tiny-imagenet-200 and the "
           "small CNN on CIFAR-10. Jobs keep running when you close this tab.")
store = job_store(str(db_path()))
RECIPES = {name: r for name, r in recipes().items()}


def dataset_label(info: datasets.DatasetInfo) -> str:
    state = "" if info.ready else " · needs preparing"
    return f"{info.path.name} ({info.kind}, {len(info.classes)} classes, {info.train_count} train images{state})"


def download_section(roots: list) -> None:
    st.info("No dataset found in the data roots "
            f"({', '.join(str(r) for r in roots) or 'none: set DLGUIDE_DATA_ROOTS'}). Download one into "
            "the first root, or copy an ImageFolder (train/<class>/, val/<class>/) there.")
    if not roots or settings.kiosk_mode():
        return
    left, right = st.columns(2)
    fetchers = {"tiny-imagenet-200 (237 MB)": datasets.fetch_tiny_imagenet, "CIFAR-10 (163 MB)": datasets.fetch_cifar10}
    for column, (label, fetch) in zip((left, right), fetchers.items()):
        if column.button(f"Download {label}", key=f"train_download_{label.split()[0]}"):
            bar = st.progress(0.0, text=f"Downloading {label}")
            try:
                fetch(roots[0], lambda done, total, bar=bar: bar.progress(min(done / total, 1.0) if total else 0.0))
                st.rerun()
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")


def dataset_browser(info: datasets.DatasetInfo) -> None:
    """Class counts and a few images per class (the guide's show_image), before training on them."""
    counts = pd.DataFrame({"class": list(info.train_counts), "train images": list(info.train_counts.values())})
    st.bar_chart(counts, x="class", y="train images", height=220)
    samples = (datasets.cifar_samples(info) if info.kind == "cifar10" else
               {k: [str(p) for p in v] for k, v in datasets.sample_paths(info).items()})
    for name, images in list(samples.items())[:10]:
        if images:
            st.image(images, caption=[name] * len(images), width=96)


def pick_dataset() -> datasets.DatasetInfo | None:
    roots = settings.data_roots()
    found = datasets.find_datasets(roots)
    if not found:
        download_section(roots)
        return None
    info = st.selectbox("Dataset (from the configured data roots)", found, format_func=dataset_label,
                        key="train_dataset")
    if not info.ready:
        st.warning("This tiny-imagenet copy still has the zip's val/images layout. Prepare it first "
                   "(the guide's val re-organisation; safe to re-run).", icon=":material/folder_open:")
        if st.button("Prepare the val folder", key="train_prepare"):
            try:
                report = datasets.prepare_tiny_imagenet(info.path)
                st.success(f"Moved {report.moved} images ({report.total} in {report.classes} classes).")
                st.rerun()
            except DlguideError as exc:
                st.error(str(exc), icon=":material/block:")
        return None
    with st.expander("Browse this dataset", expanded=False):
        if st.toggle("Show class counts and samples", key="train_browse"):
            dataset_browser(info)
    return info


def devices_section(name: str, info: datasets.DatasetInfo, default_batch: int) -> dict:
    """Data-parallel settings (torchrun + DDP); outside the form so the multi-node command updates live."""
    most, kind = launch.device_options()
    with st.expander(f"Devices and machines (up to {most} {kind}s here)", expanded=False):
        c1, c2, c3 = st.columns(3)
        values = {
            "nproc_per_node": c1.number_input(f"Devices: N ({kind}s on this machine)", 1, most, 1,
                                              key=f"train_{name}_nproc"),
            "max_restarts": c2.number_input("Max restarts (resume from checkpoint)", 0, 100, 0,
                                            key=f"train_{name}_restarts"),
            "sync_batchnorm": c1.checkbox("SyncBatchNorm", False, disabled=kind != "GPU",
                                          key=f"train_{name}_syncbn"),
            "scale_lr": c2.checkbox("Linear scaling rule (lr × N)", False, key=f"train_{name}_scale_lr"),
        }
        if c3.toggle("Several machines", key=f"train_{name}_multinode"):
            values["nnodes"] = c3.number_input("Machines", 2, 4096, 2, key=f"train_{name}_nnodes")
            values["rdzv_endpoint"] = c3.text_input("Rendezvous HOST:PORT (this machine)",
                                                    placeholder="node0.example:29400", key=f"train_{name}_rdzv")
        batch = int(st.session_state.get(f"train_{name}_batch", default_batch))  # the form's last value
        st.caption(f"Batch size is per device: at batch size {batch}, "
                   + launch.describe_batch(batch, values["nproc_per_node"], values.get("nnodes", 1))
                   + ". The learning rate is used as set unless "
                   "the linear scaling rule is ticked." + ("" if kind == "GPU" else " Without GPUs, N processes "
                   "share this machine's cores through Gloo: a way to try it, not to go faster."))
        if "nnodes" in values:
            show_join_commands(name, info, values)
    return values


def show_join_commands(name: str, info: datasets.DatasetInfo, values: dict) -> None:
    try:
        spec = launch.LaunchSpec(values["nproc_per_node"], values["nnodes"], 0, values["rdzv_endpoint"],
                                      values["max_restarts"])
    except DistributedError as exc:
        st.warning(str(exc))
        return
    st.markdown("Start the job here, then run this on each other machine (same dlguide and dataset path):")
    st.code("\n".join(launch.join_commands(spec, name, str(info.path))), language="bash")


def job_form(info: datasets.DatasetInfo) -> None:
    """The recipe's fields with the guide's defaults; keys carry the recipe so defaults follow it."""
    name = st.selectbox("Recipe", list(RECIPES), key="train_recipe",
                        format_func=lambda n: f"{n} · {RECIPES[n].summary}")
    recipe = RECIPES[name]
    if recipe.framework != "pytorch":
        st.info(f"{name} is a {recipe.framework} recipe: start it in the TensorFlow section below.")
        return
    d = recipe.config_cls()
    processes = devices_section(name, info, d.batch_size)
    with st.form(f"train_form_{name}"):
        c1, c2, c3, c4 = st.columns(4)
        values = {
            "epochs": c1.number_input("Epochs", 1, 1000, d.epochs, key=f"train_{name}_epochs"),
            "batch_size": c2.number_input("Batch size", 1, 4096, d.batch_size, key=f"train_{name}_batch"),
            "lr": c3.number_input("Learning rate", 1e-6, 10.0, d.lr, format="%.4f", key=f"train_{name}_lr"),
            "max_steps": c4.number_input("Max steps (0 = all)", 0, 10_000_000, 0, key=f"train_{name}_max_steps"),
            "image_size": c1.number_input("Image size", 32 if name == "cifar_net" else 75, 1024, d.image_size,
                                          disabled=name == "cifar_net", key=f"train_{name}_size"),
            "weights": c2.selectbox("Weights", ["imagenet", "none", *map(str, job_checkpoints())],
                                    index=0 if d.weights == "imagenet" else 1, key=f"train_{name}_weights"),
            "workers": c3.number_input("Loader workers", 0, 64, d.workers, key=f"train_{name}_workers"),
            "device": c4.selectbox("Device", ["auto", "cpu", "cuda"], key=f"train_{name}_device"),
            "label_smoothing": c1.number_input("Label smoothing", 0.0, 0.99, d.label_smoothing,
                                               key=f"train_{name}_smoothing"),
            "seed": c2.number_input("Seed", 0, 2**31 - 1, d.seed, key=f"train_{name}_seed"),
            "amp": c3.checkbox("Mixed precision (GPU)", d.amp, key=f"train_{name}_amp"),
            "channels_last": c4.checkbox("channels_last", d.channels_last, key=f"train_{name}_channels_last"),
            "amp_dtype": AMP_DTYPE_FLAGS[c3.selectbox("Mixed precision dtype", list(AMP_DTYPE_FLAGS),
                                                      key=f"train_{name}_amp_dtype")],
        }
        submitted = st.form_submit_button("Start training", type="primary", key=f"train_{name}_start")
    if submitted:
        values["max_steps"] = values["max_steps"] or None
        values.update(processes)
        try:
            cfg = recipe.make_config(data=str(info.path), **values)
            job = queue.submit(store, name, cfg)
            batch = launch.describe_batch(cfg.batch_size, cfg.nproc_per_node, cfg.nnodes)
            st.success(f"Job {job.id} {job.status}: {batch}.", icon=":material/rocket_launch:")
        except DlguideError as exc:
            st.error(str(exc), icon=":material/block:")


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) if seconds < 86400 else f"{seconds / 86400:.1f} days"


@st.fragment(run_every=2)
def job_table() -> None:
    all_jobs = store.list_jobs()  # marks dead processes interrupted
    queue.dispatch(store)  # and starts queued jobs when a slot is free
    if not all_jobs:
        st.info("No jobs yet: start one above.")
        return
    rows = [store.summary(j) for j in all_jobs]
    st.dataframe(pd.DataFrame([{
        "job": r["id"], "recipe": r["recipe"], "status": r["status"], "epoch": r["epoch"],
        "progress": f"{r['step'] or 0}/{r['total_steps'] or '?'}",
        "images/s": None if r["images_per_s"] is None else round(r["images_per_s"], 1),
        "ETA": _eta(r["eta_s"]), "note": r["error"] or ""} for r in rows]), hide_index=True, key="train_jobs_table")
    job_actions(all_jobs)


def job_actions(all_jobs: list) -> None:
    by_id = {j.id: j for j in all_jobs}
    pick, cancel, resume, delete = st.columns([3, 1, 1, 1], vertical_alignment="bottom")
    job_id = pick.selectbox("Job", list(by_id), key="train_action_job",
                            format_func=lambda i: f"{i} · {by_id[i].recipe} · {by_id[i].status}")
    job = by_id[job_id]
    try:
        # Each action reruns the page so the table above shows the new status now, not at the next refresh.
        if cancel.button("Cancel", key="train_cancel", disabled=job.status not in ACTIVE):
            store.request_cancel(job_id)
            st.toast(f"Cancelling {job_id} at its next step")
            st.rerun()
        if resume.button("Resume", key="train_resume", disabled=job.status not in RESUMABLE):
            queue.resume(store, job_id)
            st.toast(f"Resumed {job_id}")
            st.rerun()
        if delete.button("Delete", key="train_delete", disabled=job.status in ACTIVE):
            store.delete(job_id)
            st.rerun()
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")


def steps_of(job: Job) -> dict[str, list]:
    """All per-step rows of a job, fetched incrementally (only new rows each refresh)."""
    cache = st.session_state.setdefault("train_steps_cache", {})
    key = f"{job.id}:{job.attempts}"  # a resume rewrites the steps after the checkpoint
    cols = cache.get(key)
    if cols is None or (cols["step"] and not store.has_step(job.id, cols["step"][-1], cols["time"][-1])):
        cols = cache[key] = store.steps(job.id)  # new, or a resumed run trimmed or redid what we hold
    else:
        new = store.steps(job.id, after=cols["step"][-1] if cols["step"] else 0)
        for name, values in new.items():
            cols[name].extend(values)
    return cols


def epoch_figures(runs: dict[str, list[dict]], log_y: bool) -> tuple:
    losses, accuracy = {}, {}
    for name, rows in runs.items():
        x = [r["epoch"] for r in rows]
        losses[f"{name} train"] = (x, [r["train_loss"] for r in rows], "solid")
        losses[f"{name} val"] = (x, [r["val_loss"] for r in rows], "dash")
        accuracy[f"{name} top-1"] = (x, [r["top1"] for r in rows], "solid")
        if any(r["top5"] is not None for r in rows):  # TensorFlow recipes record top-1 only
            accuracy[f"{name} top-5"] = (x, [r["top5"] for r in rows], "dot")
    loss_fig = curve_figure(losses, "Loss per epoch", log_y=log_y)
    acc_fig = curve_figure(accuracy, "Val accuracy per epoch (%)")
    for fig in (loss_fig, acc_fig):
        fig.update_xaxes(title="epoch")
        fig.update_layout(legend=dict(orientation="h", y=-0.35))  # below the axis title, not over it
    return loss_fig, acc_fig


@st.fragment(run_every=1)
def live_view(all_jobs: list) -> None:
    by_id = {j.id: j for j in store.list_jobs(refresh=False)} or {j.id: j for j in all_jobs}
    chosen = [by_id[i] for i in st.session_state.get("train_view_jobs", []) if i in by_id]
    if not chosen:
        return
    smoothing = st.session_state.get("train_smoothing", 0.6)
    log_y = st.session_state.get("train_log_y", False)
    runs = {j.id: steps_of(j) for j in chosen}
    shown = sum(len(c["step"]) for c in runs.values())
    st.caption(f"{shown:,} steps stored · refreshed {time.strftime('%H:%M:%S')} · "
               + " · ".join(f"{j.id}: {j.status}" for j in chosen))
    epochs = {j.id: store.epochs(j.id) for j in chosen}
    for job in chosen:  # a diverged run says so, with what to change (no status change)
        for warning in training_warnings(runs[job.id]["loss"], epochs[job.id], job.config):
            st.warning(f"{job.id}: {warning}", icon=":material/trending_up:")
    comparison_table(store, chosen, key="train_compare_table")
    st.plotly_chart(training_loss_figure(runs, smoothing, log_y=log_y), key="train_loss_chart")
    left, right = st.columns(2)
    lr = {name: stride(c["step"], c["lr"]) for name, c in runs.items()}
    ips = {name: downsample(c["step"], c["images_per_s"]) for name, c in runs.items()}
    left.plotly_chart(curve_figure(lr, "Learning rate", log_y=log_y), key="train_lr_chart")
    right.plotly_chart(curve_figure(ips, "Images/s"), key="train_ips_chart")
    accuracy = {name: stride(c["step"], c["accuracy"])
                for name, c in runs.items() if any(a is not None for a in c["accuracy"])}
    if accuracy:  # TensorFlow jobs: Keras reports a per-batch running mean over the epoch
        st.plotly_chart(curve_figure(accuracy, "Training accuracy per batch (%, running mean within each epoch)"),
                        key="train_step_acc_chart")
    if any(epochs.values()):
        loss_fig, acc_fig = epoch_figures(epochs, log_y)
        left.plotly_chart(loss_fig, key="train_epoch_loss_chart")
        right.plotly_chart(acc_fig, key="train_epoch_acc_chart")
    for job in chosen:
        if job.status not in ACTIVE:
            per_class_chart(job)


def per_class_chart(job: Job) -> None:
    """A finished job's top-1 per class at its last epoch (the guide's closing per-class printout)."""
    per_class = store.per_class_accuracy(job.id)
    if not per_class:
        return
    fig = go.Figure(go.Bar(x=list(per_class), y=list(per_class.values()), marker_color="#1f5fbf",
                           hovertemplate="%{x}: %{y:.1f} %<extra></extra>"))
    fig.update_layout(title=f"{job.id}: accuracy per class at the last epoch (%)", height=280,
                      margin=dict(l=10, r=10, t=40, b=10), yaxis_range=[0, 100])
    st.plotly_chart(fig, key=f"train_per_class_{job.id}")


def view_controls(all_jobs: list) -> None:
    runs = [j for j in all_jobs if is_training(j.recipe)]  # evaluation jobs have no curves to overlay
    ids = [j.id for j in runs]
    default = [j.id for j in runs if j.status == "running"][:1] or ids[:1]
    c1, c2, c3 = st.columns([4, 2, 1], vertical_alignment="bottom")
    c1.multiselect("Runs to show (several overlay)", ids, default=default, key="train_view_jobs")
    c2.slider("Smoothing (EMA)", 0.0, 0.99, 0.6, 0.01, key="train_smoothing")
    c3.toggle("Log scale", key="train_log_y")


def export_section(all_jobs: list) -> None:
    job_id = st.selectbox("Export a job's metrics", [j.id for j in all_jobs], key="train_export_job")
    st.download_button("Download CSV", store.export_csv(job_id), file_name=f"{job_id}.csv", mime="text/csv",
                       key="train_export_csv")
    st.caption(f"Every job also writes TensorBoard event files: `tensorboard --logdir {settings.home() / 'jobs'}` "
               "(older jobs: `python -m dlguide_core jobs export ID --tensorboard DIR`).")


def evaluate_section(all_jobs: list) -> None:
    """A finished job's checkpoint on a held-out split (torchvision's --test-only), with its plots."""
    done = [j for j in all_jobs if j.status not in ACTIVE and j.checkpoint and Path(j.checkpoint).is_file()
            and j.framework == "pytorch"]
    if not done:
        st.info("No finished PyTorch job with a checkpoint yet.")
        return
    by_id = {j.id: j for j in done}
    job = by_id[st.selectbox("Job", list(by_id), key="train_eval_job",
                             format_func=lambda i: f"{i} · {by_id[i].recipe} · {by_id[i].status}")]
    evaluation_form(job.checkpoint, "train_eval", prefer_data=job.config.get("data"))


st.subheader("New job")
picked = pick_dataset()
if picked is not None:
    job_form(picked)
tf_train_section(store)  # the TensorFlow recipes: their own data (idx files, aclImdb) and form

st.subheader("Jobs")
job_table()
all_jobs = store.list_jobs(refresh=False)
if all_jobs:
    st.subheader("Live curves")
    view_controls(all_jobs)
    live_view(all_jobs)
    with st.expander("Export metrics (CSV, TensorBoard)"):
        export_section(all_jobs)
    with st.expander("Evaluate a finished job"):
        evaluate_section(all_jobs)
