"""`jobs list|show|cancel|resume|export|delete|logs`: inspect and steer training jobs, on any executor."""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from dlguide_core.cli.common import TerminalSafe
from dlguide_core.cli.job_logs import follow_to_end, print_log
from dlguide_core.cli.train import run_foreground
from dlguide_core.data.class_words import readable_names
from dlguide_core.jobs import foreground, liveness, queue
from dlguide_core.jobs.catalog import is_training
from dlguide_core.jobs.comparison import run_summary
from dlguide_core.jobs.evaluation_job import stored_result
from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.executors.registry import DEFAULT, get_executor
from dlguide_core.jobs.job import epoch_label, with_epoch_number
from dlguide_core.jobs.ownership import audit, authorize, cli_actor
from dlguide_core.jobs.store import ACTIVE, Job, JobStore, open_store
from dlguide_core.jobs.tensorboard_export import export_job
from dlguide_core.training.diagnostics import training_warnings

EPOCH_KEYS = ("epoch", "train_loss", "val_loss", "top1", "top5")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("jobs", help="list, inspect, cancel, resume and export training jobs")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="every job, newest first")
    listing.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="one job with its last step and per-epoch metrics")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    sub.add_parser("cancel", help="stop a job at its next step (with a checkpoint)").add_argument("id")
    resume = sub.add_parser("resume", help="continue a cancelled, interrupted or failed job")
    resume.add_argument("id")
    resume.add_argument("--detach", action="store_true", help="queue it and return at once")
    export = sub.add_parser("export", help="per-step metrics as CSV on stdout (an epoch's scores on its last step's "
                            "row), or as TensorBoard event files")
    export.add_argument("id")
    form = export.add_mutually_exclusive_group(required=True)
    form.add_argument("--csv", action="store_true", help="CSV on stdout")
    form.add_argument("--tensorboard", metavar="DIR",
                      help="write event files to DIR/ID/ (for jobs made before every job wrote its own)")
    sub.add_parser("delete", help="forget a finished job and remove its folder").add_argument("id")
    logs = sub.add_parser("logs", help="the job's log (local: job.log; Slurm: the batch output file)")
    logs.add_argument("id")
    logs.add_argument("--follow", action="store_true", help="keep printing until the job ends")
    p.set_defaults(func=run)


def list_record(store: JobStore, job: Job) -> dict[str, Any]:
    """One `jobs list --json` record: the job-table row (JobSummary), `created`, the scores (RunSummary), `config`,
    then `epoch_number` (the last step's epoch from 1, as the texts count; added last, so the keys keep their order)."""
    summary = store.summary(job)
    return (summary.to_json() | {"created": job.created} | run_summary(store, job).to_json()
            | {"config": job.config, "epoch_number": epoch_label(summary.epoch)})


def job_json(store: JobStore, job: Job) -> dict[str, Any]:
    """The `jobs show --json` contract: `epochs` is the per-epoch metrics list (`epoch` from 0, as stored;
    `epoch_number` from 1, as the texts say it; `last_step` has both too); the planned epoch
    count (Job.epochs, else the config's) is `planned_epochs`; `warnings` says, in one line each with
    a hint, when the losses show the run diverging (dlguide_core.training.diagnostics; the status is unchanged);
    an evaluation job adds `evaluation` (the `evaluate --json` payload, None until it succeeds)."""
    data = job.to_json()
    last = tracking.last_known(job.id)  # a scheduler's last word: Slurm's pending reason, say
    data["scheduler"] = None if last is None else {"state": last.state, "reason": last.reason}
    data["planned_epochs"] = job.epochs if job.epochs is not None else job.config.get("epochs")
    last_step = store.last_step(job.id)
    data["last_step"] = None if last_step is None else with_epoch_number(last_step)
    data["epochs"] = [with_epoch_number(row) for row in store.epochs(job.id)]
    data["per_class_accuracy"] = store.per_class_accuracy(job.id)
    if not is_training(job.recipe):  # an evaluation job (issue 13): its `evaluate --json` payload once finished
        data["warnings"], data["evaluation"] = [], stored_result(job.id)
        return data
    data["warnings"] = training_warnings(store.steps(job.id, extras=False)["loss"], data["epochs"], job.config)
    return data


def run(args: argparse.Namespace) -> int:
    store = open_store()
    action = {"list": _list, "show": _show, "cancel": _cancel, "resume": _resume, "export": _export,
              "delete": _delete, "logs": _logs}[args.action]
    if args.action in ("list", "show", "cancel", "resume"):
        _sync(store, args)
    if args.action in ("list", "show") and not args.json:  # names and errors are anyone's text: no ESC codes
        with redirect_stdout(TerminalSafe(sys.stdout)), redirect_stderr(TerminalSafe(sys.stderr)):
            return action(store, args)
    return action(store, args)


def _sync(store: JobStore, args: argparse.Namespace) -> None:
    """Fold the schedulers' view into the store first (a Slurm job killed at its time limit, say)."""
    jobs = [store.get(args.id)] if getattr(args, "id", None) else None
    args.unknown_here = tracking.sync(store, jobs).not_answering  # executor -> why its jobs are unknown here
    for message in args.unknown_here.values():
        print(f"warning: {message}; its jobs show their last known state", file=sys.stderr)


def _unknown_here(args: argparse.Namespace, job: Job) -> str | None:
    """Why an active scheduler job's state is unknown from this host (its scheduler cannot be asked), or None."""
    return getattr(args, "unknown_here", {}).get(tracking.executor_of(job)) if job.status in ACTIVE else None


def _logs(store: JobStore, args: argparse.Namespace) -> int:
    return print_log(store, args.id, args.follow)


def _list(store: JobStore, args: argparse.Namespace) -> int:
    all_jobs = store.list_jobs()
    for line in store.unreadable_jobs():  # listed without them, each named in one line
        print(f"warning: {line}", file=sys.stderr)
    # A slot freed by a dead job starts the next queued one. Beside jobs still running, that needs the GPU
    # count, which imports torch (~10 s per poll): left to DLGUIDE_MAX_JOBS, else to the runners' own dispatch.
    queue.dispatch(store, lambda: queue.max_jobs_setting() or 0)
    if args.json:
        print(json.dumps([list_record(store, j) for j in all_jobs], indent=2))
        return 0
    if all_jobs:  # the columns as before, then the run's name (last before the error: it may hold spaces)
        print(f"{'ID':<24}  {'RECIPE':<14} {'STATUS':<11} {'PROGRESS':<18} {'CREATED':<16}  NAME")
    for job in all_jobs:
        row = store.summary(job)
        progress = f"step {row.step or 0}/{row.total_steps or '?'}"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(job.created))
        print(f"{job.id:<24}  {job.recipe:<14} {job.status:<11} {progress:<18} {when:<16}  {job.name or '-'}"
              + (f"  {short_error(job.error)}" if job.error else "")
              + ("  (unknown here)" if _unknown_here(args, job) else ""))
    return 0


def short_error(error: str, limit: int = 100) -> str:
    """A job's error as a table row holds it: its first sentence, at most `limit` characters, then "..." when
    there is more (the whole text is in `jobs show ID`; issue 43: a 4-sentence error filled a row)."""
    text = " ".join(error.split())
    cut = text.find(". ")
    first = text[:cut + 1] if cut >= 0 else text
    first = first if len(first) <= limit else first[:limit].rstrip()
    return first if first == text else first + " ..."


def _show(store: JobStore, args: argparse.Namespace) -> int:
    job = store.get(args.id)
    data = job_json(store, job)
    if unknown := _unknown_here(args, job):
        data["scheduler"] = {"state": "unknown here", "reason": unknown}
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    print(f"{job.id}  {job.recipe}  {job.status}" + (f"  ({job.error})" if job.error else ""))
    print(f"  pid {job.pid}  checkpoint {job.checkpoint or '-'}"
          + (f"  on {job.executor} as {job.external_id}" if job.executor != DEFAULT else ""))
    if job.status in ("queued", "running") and data["scheduler"] and data["scheduler"]["reason"]:
        print(f"  {'unknown here: ' if unknown else ''}{data['scheduler']['reason']}")
    if job.status == "running" and job.executor == DEFAULT and not liveness.can_judge(job.host, job.boot_id):
        quiet = time.time() - liveness.last_sign_of_life(job.job_dir, job.started)
        print(f"  its process is not visible from here ({liveness.where_unseen(job.host, job.boot_id)}); "
              f"last sign of life {quiet:.0f} s ago")
    if data["last_step"]:
        last = data["last_step"]
        loss = "NaN" if last["loss"] is None else f"{last['loss']:.4f}"  # the store keeps a NaN loss as NULL
        print(f"  step {last['step']}/{job.total_steps or '?'}  epoch {epoch_label(last['epoch'])}  loss {loss}")
    for row in data["epochs"]:  # epochs counted from 1, as on the Train page (the JSON keeps the store's 0)
        row = {**row, "epoch": epoch_label(row["epoch"])}
        print("  " + "  ".join(f"{k} {row[k]:.4f}" if isinstance(row[k], float) else f"{k} {row[k]}"
                               for k in EPOCH_KEYS))
    _print_per_class(data["per_class_accuracy"], job.config.get("data"))
    if result := data.get("evaluation"):
        print(f"  {result['weights']} on {result['data']}/{result['split']}: {result['images']} images  "
              f"top-1 {result['top1']:.2f} %  top-5 {result['top5']:.2f} %  loss {result['loss']:.4f}")
    for warning in data["warnings"]:
        print(f"  warning: {warning}")
    return 0


def _print_per_class(per_class: dict[str, float], data: str | None) -> None:
    """The guide's closing table: "Accuracy for class: plane is 37.9 %", one line per class, in the dataset's
    words (tiny-imagenet's words.txt) with the class id after it when they differ (a WordNet id)."""
    if not per_class:
        return
    ids = tuple(per_class)
    names = readable_names(Path(data), ids) if data else ids
    shown = [name if name == wnid else f"{name} ({wnid})" for name, wnid in zip(names, ids, strict=True)]
    print("  per-class accuracy (last epoch):")
    width = max(len(name) for name in shown)
    for name, accuracy in zip(shown, per_class.values(), strict=True):
        print(f"    {name:<{width}}  {accuracy:5.1f} %")


def _cancel(store: JobStore, args: argparse.Namespace) -> int:
    authorize(job := store.get(args.id), actor := cli_actor(), "cancel")  # the OS user: jobs.ownership
    cancelled = get_executor(tracking.executor_of(job)).cancel(store, job)
    audit(job, actor, "cancel")
    job = cancelled
    print(f"job {job.id} {'cancelled' if job.status == 'cancelled' else 'stops at its next step'}")
    return 0


def _resume(store: JobStore, args: argparse.Namespace) -> int:
    authorize(owned := store.get(args.id), actor := cli_actor(), "resume")
    name = tracking.executor_of(owned)
    if name != DEFAULT:  # a new batch job (a new external id) from the last checkpoint
        job = get_executor(name).resume(store, args.id)
        audit(owned, actor, "resume")
        print(f"job {job.id} resumed on {name} as {job.external_id}", file=sys.stderr)
        return follow_to_end(store, job.id, as_json=False) if not args.detach else 0
    if not args.detach:  # running in this process at once: no dispatcher can take it
        job = foreground.resume(store, args.id)
        audit(owned, actor, "resume")
        return run_foreground(store, job.id, as_json=False)
    job = queue.resume(store, args.id)
    audit(owned, actor, "resume")
    print(f"job {job.id} {job.status}")
    return 0


def _export(store: JobStore, args: argparse.Namespace) -> int:
    if args.tensorboard:
        logdir = export_job(store, args.id, Path(args.tensorboard).expanduser() / args.id)
        print(f"TensorBoard event files in {logdir} (tensorboard --logdir {logdir.parent})")
        return 0
    sys.stdout.write(store.export_csv(args.id))
    return 0


def _delete(store: JobStore, args: argparse.Namespace) -> int:
    authorize(owned := store.get(args.id, lenient=True), actor := cli_actor(), "delete")  # a damaged row too
    store.delete(args.id)
    audit(owned, actor, "delete")
    print(f"job {args.id} deleted")
    return 0
