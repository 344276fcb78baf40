"""The job process: `python -m dlguide_core.jobs.runner JOB_ID`.

Started detached by jobs.queue (or run in-process by the foreground `train` CLI; a distributed job
runs torchrun over jobs.worker instead): rebuilds the recipe config from the store, runs the recipe
with a StoreSink, and writes the final status. SIGTERM/SIGINT stop the loop at the next step with a
checkpoint instead of killing it mid-write (jobs.stopping).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace

from dlguide_core import threads
from dlguide_core.errors import DlguideError
from dlguide_core.gpu_slots import process_slot
from dlguide_core.jobs import tensorboard_export
from dlguide_core.jobs.catalog import get_recipe, is_training
from dlguide_core.jobs.queue import dispatch
from dlguide_core.jobs.stopping import final_status, stop_on_signals
from dlguide_core.jobs.store import Job, JobStore, open_store
from dlguide_core.jobs.store_sink import StoreSink, retry_while_away
from dlguide_core.training.configs import RunContext, RunResult
from dlguide_core.training.sinks import ConsoleSink, TeeSink, TrainingSink


def _run(job: Job, sink: TrainingSink) -> RunResult:
    recipe = get_recipe(job.recipe)
    cfg = recipe.config_from_dict(job.config)
    ctx = RunContext(job.id, job.recipe, job.job_dir, sink, slot=process_slot(job.slot or 0))
    ctx = replace(ctx, resume=ctx.checkpoint_path.is_file())  # a resumed job continues from its checkpoint
    return recipe.run_function()(cfg, ctx)


Decide = Callable[[str, "str | None"], "tuple[str, str | None]"]


def run_job(store: JobStore, job_id: str, extra_sink: TrainingSink | None = None, decide: Decide | None = None) -> str:
    """Run a claimed (running) job in this process to its final status; returns that status. `decide` (a
    scheduler's job entry) may change (status, error) before it is written; "queued": it already wrote that."""
    job = store.get(job_id, refresh=False)
    sink = StoreSink(store.url, job_id)
    # After the store (see its on_start); an evaluation job has no curves to keep there.
    tensorboard = tensorboard_export.job_sink(store.url, job_id) if is_training(job.recipe) else None
    status, error = "failed", None
    try:
        with stop_on_signals(sink):
            result = _run(job, TeeSink(*(s for s in (sink, tensorboard, extra_sink) if s is not None)))
        status, error = final_status(result, sink)
    except DlguideError as exc:
        error = str(exc)
    except Exception as exc:  # any bug in a recipe: the job fails with its message, the log keeps the trace
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if tensorboard:
            tensorboard.close()
        sink.close()
        if decide is not None:
            status, error = _decided(decide, status, error)
        if status != "queued":
            retry_while_away(lambda: store.finish(job_id, status, error))  # a store briefly away keeps the ending
    if error:
        print(f"job {job_id} {status}: {error}", file=sys.stderr, flush=True)
    return status


def _decided(decide: Decide, status: str, error: str | None) -> tuple[str, str | None]:
    try:
        return decide(status, error)
    except Exception as exc:  # noqa: BLE001 - judging the stop must never lose the ending itself
        print(f"could not judge the stop ({type(exc).__name__}: {exc}); it stays {status}", file=sys.stderr)
        return status, error


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dlguide_core.jobs.runner JOB_ID", file=sys.stderr)
        return 2
    threads.declare("job")  # its environment came from the launcher (queue.job_env); torch's counts are set here
    store = open_store()
    store.set_pid(args[0], os.getpid())
    print(f"job {args[0]} running in process {os.getpid()}", flush=True)
    status = run_job(store, args[0], ConsoleSink(every=50, stream=sys.stdout))
    print(f"job {args[0]} {status}", flush=True)
    dispatch(store)  # our slot is free: start the next queued job, even with no app open
    return 0 if status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
