"""`train --recipe R --data DIR [...] [--detach] [--json]`: one training job through the store.

`--nproc-per-node N [--nnodes M --node-rank K --rdzv-endpoint HOST:PORT] [--max-restarts R]` runs
it under torchrun (see dlguide_core/jobs/worker.py and docs/DISTRIBUTED.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dlguide_core.cli.common import add_field_flags, dataset_path, field_values
from dlguide_core.errors import DistributedError
from dlguide_core.jobs import foreground, queue
from dlguide_core.jobs.catalog import get_recipe, recipes
from dlguide_core.jobs.store import JobStore, job_dir, open_store
from dlguide_core.tf.configs import TENSORFLOW_RECIPES
from dlguide_core.training.configs import RDZV_BY_SCHEDULER, ConfigError, TrainConfig
from dlguide_core.training.sinks import ConsoleSink

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# The config fields offered as flags, in --help's order; each flag is generated from its field's declaration
# (training/configs.py). A flag left out is None: the recipe keeps its (the guide's) default.
FIELDS = ("epochs", "batch_size", "lr", "image_size", "max_steps", "weights", "workers", "device", "amp",
          "amp_dtype", "channels_last", "label_smoothing", "seed")
DIST_FIELDS = ("nproc_per_node", "nnodes"), ("rdzv_endpoint", "max_restarts", "sync_batchnorm", "scale_lr")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a recipe as a job (foreground by default)")
    # The TensorFlow names are always accepted, so a machine without TensorFlow says why it cannot run them.
    p.add_argument("--recipe", required=True, choices=sorted({*recipes(), *TENSORFLOW_RECIPES}))
    p.add_argument("--data", metavar="DIR", help="dataset folder (see `prepare`); required for the PyTorch "
                   "recipes, optional for the TensorFlow ones (left out: keras.datasets / the IMDB download)")
    add_field_flags(p, TrainConfig, FIELDS)
    dist = p.add_argument_group("several devices or machines (torchrun + DDP; see docs/DISTRIBUTED.md)")
    add_field_flags(dist, TrainConfig, DIST_FIELDS[0])
    dist.add_argument("--node-rank", type=int, metavar="K", default=0,  # this machine's place, not the job's config
                      help="this machine's rank: 0 holds the job, others join it")
    add_field_flags(dist, TrainConfig, DIST_FIELDS[1])
    add_executor_arguments(p)
    p.add_argument("--detach", action="store_true", help="queue the job and return at once")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """--executor and one argument group per executor (their dests are the executor's option fields)."""
    from dlguide_core.jobs.executors.registry import DEFAULT, names

    p.add_argument("--executor", choices=names(), default=DEFAULT,
                   help="where the job runs: this machine (default), a Slurm cluster or a Ray cluster")
    slurm = p.add_argument_group("--executor slurm (docs/CLUSTERS.md); --nnodes M --nproc-per-node N ask for M "
                                 "nodes with N GPUs (or N tasks on CPUs) each")
    slurm.add_argument("--partition", metavar="P", help="default: DLGUIDE_SLURM_PARTITION, else the cluster's")
    slurm.add_argument("--account", metavar="A", help="default: DLGUIDE_SLURM_ACCOUNT")
    slurm.add_argument("--time", metavar="HH:MM:SS", help="time limit; default: DLGUIDE_SLURM_TIME, else the "
                       "partition's (the job checkpoints and becomes interrupted before it)")
    slurm.add_argument("--requeue", action=argparse.BooleanOptionalAction, default=None,
                       help="a job Slurm preempts, requeues or loses a node under comes back as the same job and "
                       "resumes from its checkpoint (default: on; --no-requeue: it ends interrupted)")
    slurm.add_argument("--requeue-on-timeout", action="store_true", default=None,
                       help="at the time limit, checkpoint and requeue instead of ending interrupted")
    slurm.add_argument("--max-requeues", type=int, metavar="N",
                       help="end a job Slurm has requeued N times as interrupted (default: 5)")
    slurm.add_argument("--gpus-per-node", type=int, metavar="N",
                       help="GPUs per node through Slurm's gres (default: --nproc-per-node on a GPU partition)")
    ray = p.add_argument_group("--executor ray (docs/CLUSTERS.md); --nproc-per-node N runs torchrun inside the Ray "
                               "job (one node)")
    ray.add_argument("--ray-address", metavar="URL", help="Ray's job API, e.g. http://HEAD:8265; default: RAY_ADDRESS")


def build_config(args: argparse.Namespace) -> Any:
    from dlguide_core.training import distributed

    overrides = field_values(TrainConfig, FIELDS + DIST_FIELDS[0] + DIST_FIELDS[1], args)
    overrides["data"] = str(dataset_path(args.data)) if args.data else ""
    if args.weights not in (None, "imagenet", "none") and args.weights.strip():  # blank: the config refuses it
        overrides["weights"] = str(Path(args.weights).expanduser().resolve())
        from dlguide_core.vision.checkpoints import load_checkpoint

        load_checkpoint(overrides["weights"])  # refused now (CheckpointError, exit 2), not in the job
    recipe = get_recipe(args.recipe)
    cfg = recipe.make_config(**overrides)
    if recipe.framework == "pytorch" and args.executor == "local":  # a cluster's nodes have their own devices
        distributed.check_devices(cfg.device, cfg.sync_batchnorm)
    return cfg


def join_run(args: argparse.Namespace) -> int:
    """Node rank > 0 of a multi-node run: torchrun here, the job and its config live on node 0."""
    from dlguide_core.jobs import launch

    try:
        spec = launch.LaunchSpec(args.nproc_per_node or 1, args.nnodes or 1, args.node_rank,
                                 args.rdzv_endpoint or "", args.max_restarts or 0)
    except DistributedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    data = str(dataset_path(args.data))
    if (problem := launch.endpoint_unresolved(spec.rdzv_endpoint)) is not None:  # torchrun would print a traceback
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    print(f"joining the run at {spec.rdzv_endpoint} as node {spec.node_rank}", file=sys.stderr)
    return EXIT_OK if foreground.join(launch.torchrun_command(spec, data=data)) == 0 else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    if not args.data and (args.recipe not in TENSORFLOW_RECIPES or args.node_rank):  # joining: a PyTorch run
        print(f"error: --data DIR is required for {args.recipe} (see `python -m dlguide_core prepare`)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.executor != "local":
        return submit_elsewhere(args)
    if args.node_rank:
        return join_run(args)
    try:
        cfg = build_config(args)
    except (ConfigError, DistributedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if cfg.data and not Path(cfg.data).is_dir():
        print(f"error: {cfg.data} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    store = open_store()
    if args.detach:
        _fetch_imagenet_weights(args.recipe, cfg)
        job = queue.submit(store, args.recipe, cfg)
        print(json.dumps({"job_id": job.id}) if args.json else f"job {job.id} {job.status}; "
              f"follow it with `python -m dlguide_core jobs show {job.id}`")
        return EXIT_OK
    job = foreground.start(store, args.recipe, cfg)  # running in this process: no dispatcher can take it
    return run_foreground(store, job.id, args.json)


def _fetch_imagenet_weights(recipe_name: str, cfg: Any) -> None:
    """A detached job's ImageNet weights, fetched now (cached: nothing to do): offline without the file, the
    submitter gets the one-line reason (WeightsUnavailable, exit 3), not a queued job that fails (issue 43)."""
    recipe = get_recipe(recipe_name)
    if recipe.framework != "pytorch" or recipe.arch is None or getattr(cfg, "weights", None) != "imagenet":
        return
    from dlguide_core.cli.common import download_progress
    from dlguide_core.vision import architectures, models

    spec = architectures.architecture(recipe.arch)
    if spec.imagenet is not None and not models.imagenet_weights_path(spec).is_file():
        models.fetch_imagenet_weights(download_progress(spec.imagenet.filename), spec)


def submit_elsewhere(args: argparse.Namespace) -> int:
    """--executor slurm|ray: hand the job to the cluster's scheduler, then follow its log (or return: --detach)."""
    from dlguide_core.cli.job_logs import follow_to_end
    from dlguide_core.jobs.executors.base import options_from
    from dlguide_core.jobs.executors.registry import get_executor

    executor = get_executor(args.executor)
    for dest in executor.refused_flags:
        if getattr(args, dest, None):
            print(f"error: --{dest.replace('_', '-')} is not used with --executor {args.executor}: "
                  f"{executor.refused_flags[dest]}", file=sys.stderr)
            return EXIT_USAGE
    # available() knows only RAY_ADDRESS; a given --ray-address is probed by the Ray executor's submit itself
    ok, reason = (True, None) if getattr(args, "ray_address", None) else executor.available()
    if not ok:
        print(f"error: --executor {args.executor} cannot be used here: {reason}", file=sys.stderr)
        return EXIT_USAGE
    if (args.nnodes or 1) > 1:
        args.rdzv_endpoint = RDZV_BY_SCHEDULER  # the job's first node, known when it starts
    try:
        cfg = build_config(args)
    except (ConfigError, DistributedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    options = options_from(executor.options_cls, vars(args))
    for warning in executor.submit_warnings(options):
        print(f"warning: {warning}", file=sys.stderr)
    store = open_store()
    try:
        job = executor.submit(store, args.recipe, cfg, options)
    except (ConfigError, DistributedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.detach:
        print(json.dumps({"job_id": job.id, "executor": job.executor, "external_id": job.external_id})
              if args.json else f"job {job.id} submitted to {args.executor} as {job.external_id}; follow it with "
              f"`python -m dlguide_core jobs logs {job.id} --follow`")
        return EXIT_OK
    print(f"job {job.id}: submitted to {args.executor} as {job.external_id}", file=sys.stderr)
    return follow_to_end(store, job.id, args.json)


def run_foreground(store: JobStore, job_id: str, as_json: bool) -> int:
    """Run a job created (or resumed) running in this process (jobs.foreground: here, or under torchrun for N
    processes; Ctrl-C cancels it with a checkpoint), saying where it logs and how it ended."""
    from dlguide_core.jobs.launch import describe_batch

    job = store.get(job_id, refresh=False)  # created (or resumed) running in this process
    print(f"job {job_id}: log and checkpoint in {job_dir(job_id)}", file=sys.stderr)
    if "batch_size" in job.config:
        batch = describe_batch(int(job.config["batch_size"]), job.launch.nproc_per_node, job.launch.nnodes)
        print(f"job {job_id}: {batch}", file=sys.stderr)
    status = foreground.run(store, job_id, ConsoleSink(every=10))
    job = store.get(job_id, refresh=False)
    if as_json:
        print(json.dumps({"job_id": job_id, "status": status, "error": job.error, "checkpoint": job.checkpoint}))
    else:
        print(f"job {job_id} {status}" + (f": {job.error}" if job.error else "")
              + (f"; checkpoint {job.checkpoint}" if job.checkpoint else ""))
    return EXIT_OK if status == "succeeded" else EXIT_FAILED
