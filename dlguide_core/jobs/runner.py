"""The job process: `python -m dlguide_core.jobs.runner JOB_ID`.

Started detached by jobs.launch (or run in-process by the foreground `train` CLI):
rebuilds the recipe config from the store, runs the recipe with a StoreSink, and
writes the final status. SIGTERM/SIGINT stop the loop at the next step with a
checkpoint instead of killing it mid-write.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from dlguide_core.errors import DlguideError
from dlguide_core.gpu_slots import process_slot
from dlguide_core.jobs.catalog import get_recipe, is_training
from dlguide_core.jobs.store import Job, JobStore, StoreSink, dispatch
from dlguide_core.training import distributed
from dlguide_core.training.recipes import RunContext, RunResult
from dlguide_core.training.sinks import ConsoleSink, TeeSink, TrainingSink
from dlguide_core.training.tensorboard_export import TensorBoardSink

# Ctrl-C is a deliberate stop (cancelled); SIGTERM comes from shutdowns (interrupted, resumable).
SIGNAL_REASONS = {signal.SIGINT: "cancel", signal.SIGTERM: "SIGTERM"}


@contextmanager
def _stop_on_signals(sink: StoreSink) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (tests, embedded use)
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNAL_REASONS}
    for sig, reason in SIGNAL_REASONS.items():
        signal.signal(sig, lambda *_, reason=reason: sink.request_stop(reason))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _final_status(result: RunResult, sink: StoreSink) -> tuple[str, str | None]:
    if result.status == "completed":
        return "succeeded", None
    if sink.stop_reason == "cancel":
        return "cancelled", None
    return "interrupted", f"stopped by {sink.stop_reason or 'request'} at step {result.step}; resume continues it"


def _run(job: Job, sink: TrainingSink) -> RunResult:
    recipe = get_recipe(job.recipe)
    cfg = recipe.config_from_dict(job.config)
    ctx = RunContext(job.id, job.recipe, job.job_dir, sink, slot=process_slot(job.slot or 0))
    ctx = replace(ctx, resume=ctx.checkpoint_path.is_file())  # a resumed job continues from its checkpoint
    return recipe.run_function()(cfg, ctx)


def run_job(store: JobStore, job_id: str, extra_sink: TrainingSink | None = None) -> str:
    """Run a claimed (running) job in this process to its final status; returns that status."""
    job = store.get(job_id, refresh=False)
    sink = StoreSink(store.path, job_id)
    # After the store (see its on_start); an evaluation job has no curves to keep there.
    tensorboard = TensorBoardSink(store.path, job_id) if is_training(job.recipe) else None
    status, error = "failed", None
    try:
        with _stop_on_signals(sink):
            result = _run(job, TeeSink(*(s for s in (sink, tensorboard, extra_sink) if s is not None)))
        status, error = _final_status(result, sink)
    except DlguideError as exc:
        error = str(exc)
    except Exception as exc:  # any bug in a recipe: the job fails with its message, the log keeps the trace
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if tensorboard:
            tensorboard.close()
        sink.close()
        store.finish(job_id, status, error)
    if error:
        print(f"job {job_id} {status}: {error}", file=sys.stderr, flush=True)
    return status


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--join":  # another machine of a multi-node run (issue 6)
        return distributed.run_worker(None, args[1])
    if len(args) != 1:
        print("usage: python -m dlguide_core.jobs.runner JOB_ID | --join DATA_DIR", file=sys.stderr)
        return 2
    if distributed.DistEnv.from_env().under_torchrun:  # one of torchrun's processes: see distributed.py
        return distributed.run_worker(args[0])
    store = JobStore()
    store.set_pid(args[0], os.getpid())
    print(f"job {args[0]} running in process {os.getpid()}", flush=True)
    status = run_job(store, args[0], ConsoleSink(every=50, stream=sys.stdout))
    print(f"job {args[0]} {status}", flush=True)
    dispatch(store)  # our slot is free: start the next queued job, even with no app open
    return 0 if status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
