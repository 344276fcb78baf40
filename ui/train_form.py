"""The Train page's one job form: the recipe picker leads (PyTorch and TensorFlow recipes alike, the one that
fits the data in the roots first), then that recipe's data and fields with the guide's defaults and a help
tooltip each, the data-parallel settings (torchrun + DDP, the commands other machines run to join) and one
Start button. Starting only queues the job; its process is launched in the background (ui.jobs) and the job
panel reports what really happened. Widget keys carry the recipe's name, so each recipe keeps its values."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from dlguide_core import settings
from dlguide_core.data import image_folders
from dlguide_core.errors import DistributedError, DlguideError
from dlguide_core.jobs import launch
from dlguide_core.jobs.catalog import recipes
from dlguide_core.jobs.store import Job
from dlguide_core.vision import architectures
from dlguide_core.vision.models import job_checkpoints
from ui.auth import current_user
from ui.config_fields import default_of, field_input
from ui.dataset_picker import datasets_in_roots, pick_dataset
from ui.executors import run_on
from ui.executors import submit as submit_to
from ui.field_help import MAX_STEPS_RULE
from ui.jobs import job_started
from ui.tensorflow import tf_local_copies, tf_recipe_form


def recipe_for_kind(kind: str) -> str | None:
    """The recipe a dataset kind is for (the guide's pairing: the architecture that leads for it, whose recipe
    bears its name); the first one found in the roots leads the picker."""
    spec = architectures.for_dataset(kind)
    return spec.name if spec else None


def devices_section(name: str, info: image_folders.DatasetInfo, default_batch: int) -> dict:
    """Data-parallel settings (torchrun + DDP); outside the form so the multi-node command updates live."""
    most, kind = launch.device_options()
    kinds = f"{kind}es" if kind.endswith("s") else f"{kind}s"  # GPUs, CPU processes
    with st.expander(f"Devices and machines (up to {most} {kinds} here)", expanded=False):
        c1, c2, c3 = st.columns(3)
        config_cls = recipes()[name].config_cls
        values: dict[str, Any] = {  # drawn from the fields' declarations (ui/config_fields.py), like the form
            "nproc_per_node": field_input(c1, config_cls, "nproc_per_node", f"train_{name}_nproc", high=most,
                                          label=f"Devices: N ({kinds} on this machine)"),
            "max_restarts": field_input(c2, config_cls, "max_restarts", f"train_{name}_restarts"),
            "sync_batchnorm": field_input(c1, config_cls, "sync_batchnorm", f"train_{name}_syncbn",
                                          disabled=kind != "GPU"),
            "scale_lr": field_input(c2, config_cls, "scale_lr", f"train_{name}_scale_lr"),
        }
        if c3.toggle("Several machines", key=f"train_{name}_multinode"):
            values["nnodes"] = field_input(c3, config_cls, "nnodes", f"train_{name}_nnodes", low=2)
            values["rdzv_endpoint"] = field_input(c3, config_cls, "rdzv_endpoint", f"train_{name}_rdzv",
                                                  placeholder="node0.example:29400")
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


def default_recipe(found: dict, datasets: list[image_folders.DatasetInfo]) -> str:
    """The recipe for the data the user has: the guide's pairing for the first dataset in the roots, else a
    TensorFlow recipe with a local copy, else the first PyTorch recipe."""
    for info in datasets:
        if (lead := recipe_for_kind(info.kind)) is not None and lead in found:
            return lead
    for name, recipe in found.items():
        if recipe.framework != "pytorch" and tf_local_copies(name):
            return name
    return next((n for n, r in found.items() if r.framework == "pytorch"), next(iter(found)))


def new_job_form(store) -> None:
    """The recipe picker, then the picked recipe's data and form; a submitted job is handed to ui.jobs."""
    found = recipes()
    names = list(found)
    default = default_recipe(found, datasets_in_roots(settings.data_roots()))
    name = st.selectbox("Recipe", names, index=names.index(default), key="train_recipe",
                        format_func=lambda n: f"{n} · {found[n].summary}",
                        help="What to train; the data and fields below follow it.")
    recipe = found[name]
    left, right = st.columns(2)
    run_name = left.text_input("Run name (optional)", key="train_run_name", max_chars=120,
                               placeholder="recipe · data · time", help="A name to find the run by in the table, "
                               "the charts' comparison and the booth; editable later.")
    tags = right.text_input("Tags (optional, comma-separated)", key="train_run_tags", max_chars=200,
                            placeholder="baseline, lr-sweep", help="Labels to group runs by; editable later.")
    if recipe.framework == "pytorch":
        info = pick_dataset()
        job = None if info is None else pytorch_form(name, recipe, info, store)
    else:
        job = tf_recipe_form(store, name, recipe)
    if job is not None:
        data = Path(job.config.get("data") or "download").name
        job = store.rename(job.id, run_name.strip() or f"{name} · {data} · {time.strftime('%H:%M')}",
                           split_tags(tags))
        job_started(store, job)


def split_tags(text: str) -> list[str]:
    """"a, b,,c " -> ["a", "b", "c"] (order kept, duplicates dropped)."""
    return list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))


@dataclass(frozen=True)
class FormField:
    """A config field the PyTorch form shows: its widget key is `train_{recipe}_{key}`, in column `column`."""

    name: str
    key: str
    column: int


# What the PyTorch form shows, where; each widget is drawn from its field's declaration (ui.config_fields).
PYTORCH_FIELDS = (
    FormField("epochs", "epochs", 0), FormField("batch_size", "batch", 1), FormField("lr", "lr", 2),
    FormField("max_steps", "max_steps", 3), FormField("image_size", "size", 0), FormField("weights", "weights", 1),
    FormField("workers", "workers", 2), FormField("device", "device", 3),
    FormField("label_smoothing", "smoothing", 0), FormField("seed", "seed", 1), FormField("amp", "amp", 2),
    FormField("channels_last", "channels_last", 3), FormField("amp_dtype", "amp_dtype", 2),
)


def form_extras(spec: architectures.Architecture) -> dict[str, dict[str, Any]]:
    """What the declarations leave to the form: the architecture's image sizes, the weights found (untrained
    first when the ImageNet weights cannot be had: see imagenet_missing)."""
    weights: dict[str, Any] = {"options": ["imagenet", "none", *map(str, job_checkpoints())]}
    if imagenet_missing(spec):
        weights["default"] = "none"
    return {"image_size": {"low": spec.min_size, "disabled": spec.fixed_size}, "weights": weights}


def imagenet_missing(spec: architectures.Architecture) -> str | None:
    """Why the ImageNet weights cannot be used by a job started now: not cached, and downloads are off (the job
    would fail at its start); None when they can."""
    from dlguide_core.downloads import offline
    from dlguide_core.vision.models import imagenet_weights_path

    if spec.imagenet is None or not offline():
        return None
    path = imagenet_weights_path(spec)
    if path.is_file():
        return None
    return (f"The ImageNet weights are not cached at `{path}` and downloads are off (DLGUIDE_OFFLINE), so the "
            "form starts from untrained weights (`none`); copy the file there to fine-tune from ImageNet.")


def pytorch_form(name: str, recipe, info: image_folders.DatasetInfo, store) -> Job | None:
    """The recipe's fields with the guide's defaults; the queued job, or None (not submitted, or refused)."""
    where = run_on(name)  # This machine / Slurm / Ray (ui.executors)
    processes = (devices_section(name, info, default_of(recipe.config_cls, "batch_size"))
                 if where.executor == "local" else where.config_values)
    spec = architectures.architecture(recipe.arch)
    extras = form_extras(spec)
    if reason := imagenet_missing(spec):
        st.info(reason, icon=":material/cloud_off:")
    with st.form(f"train_form_{name}"):
        columns = st.columns(4)
        values = {f.name: field_input(columns[f.column], recipe.config_cls, f.name, f"train_{name}_{f.key}",
                                      **extras.get(f.name, {}))
                  for f in PYTORCH_FIELDS}
        st.caption(MAX_STEPS_RULE)
        submitted = st.form_submit_button("Start training", type="primary", key=f"train_{name}_start")
    if not submitted:
        return None
    values.update(processes)
    try:  # queued here (launched in the background by ui.jobs), or handed to the chosen scheduler
        return submit_to(store, name, recipe.make_config(data=str(info.path), **values), where,
                         owner=current_user())  # owner None: the OS user
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
        return None
