"""The Train page's PyTorch job form: a recipe's fields with the guide's defaults, the data-parallel settings
(torchrun + DDP, the commands other machines run to join), and the submission to the job store. Widget keys
carry the recipe's name, so each recipe keeps its own values."""

from __future__ import annotations

import streamlit as st

from dlguide_core.data import image_folders
from dlguide_core.errors import DistributedError, DlguideError
from dlguide_core.jobs import launch
from dlguide_core.jobs.catalog import recipes
from dlguide_core.training.configs import AMP_DTYPE_FLAGS
from dlguide_core.vision.models import job_checkpoints
from ui.auth import current_user
from ui.executors import run_on
from ui.executors import submit as submit_to


def devices_section(name: str, info: image_folders.DatasetInfo, default_batch: int) -> dict:
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


def show_join_commands(name: str, info: image_folders.DatasetInfo, values: dict) -> None:
    try:
        spec = launch.LaunchSpec(values["nproc_per_node"], values["nnodes"], 0, values["rdzv_endpoint"],
                                      values["max_restarts"])
    except DistributedError as exc:
        st.warning(str(exc))
        return
    st.markdown("Start the job here, then run this on each other machine (same dlguide and dataset path):")
    st.code("\n".join(launch.join_commands(spec, name, str(info.path))), language="bash")


def job_form(info: image_folders.DatasetInfo, store) -> None:
    """The recipe's fields with the guide's defaults, submitted to `store`; keys carry the recipe so defaults
    follow it."""
    found = recipes()
    name = st.selectbox("Recipe", list(found), key="train_recipe",
                        format_func=lambda n: f"{n} · {found[n].summary}")
    recipe = found[name]
    if recipe.framework != "pytorch":
        st.info(f"{name} is a {recipe.framework} recipe: start it in the TensorFlow section below.")
        return
    d = recipe.config_cls()
    where = run_on(name)  # This machine / Slurm / Ray (ui.executors)
    processes = devices_section(name, info, d.batch_size) if where.executor == "local" else where.config_values
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
            job = submit_to(store, name, cfg, where, owner=current_user())  # owner None: the OS user
            batch = launch.describe_batch(cfg.batch_size, cfg.nproc_per_node, cfg.nnodes)
            on = f" on {where.executor} as {job.external_id}" if job.external_id else ""
            st.success(f"Job {job.id} {job.status}{on}: {batch}.", icon=":material/rocket_launch:")
        except DlguideError as exc:
            st.error(str(exc), icon=":material/block:")
