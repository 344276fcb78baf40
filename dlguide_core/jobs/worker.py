"""Each torchrun process of a distributed job: `python -m dlguide_core.jobs.worker JOB_ID | --join DATA`.

torchrun (its command line: jobs.launch) starts one worker per device. The workers join one process
group, agree on the writer rank (the lowest rank that holds the job record), and the writer sends
every rank the recipe and config; each then trains its shard (training.distributed) and reports
through a WriterRankSink, so only the writer streams into the store. On the job's machine the
workers run `JOB_ID`; the other machines of a multi-node run have no job record and run
`--join DATA` (their own copy of the dataset). A rank that fails stops every rank: torchrun
restarts them all (`--max-restarts`), and the next writer resumes the job from its checkpoint.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from dlguide_core import threads
from dlguide_core.errors import DlguideError, error_summary
from dlguide_core.gpu_slots import process_slot
from dlguide_core.jobs.join_checks import WorkerPayload, check_payload
from dlguide_core.jobs.queue import dispatch
from dlguide_core.jobs.stopping import final_status, stop_on_signals
from dlguide_core.jobs.store import JobStore, job_dir, open_store
from dlguide_core.jobs.store_sink import StoreSink
from dlguide_core.training import distributed
from dlguide_core.training.configs import RunContext
from dlguide_core.training.distributed import DistEnv
from dlguide_core.training.distributed_sinks import StopFlagSink, WriterRankSink
from dlguide_core.training.recipes import get_recipe
from dlguide_core.training.sinks import ConsoleSink, NullSink, TeeSink, TrainingSink


def _reclaim(store: JobStore, job_id: str, env: DistEnv) -> bool:
    """After a torchrun restart: put the job back to running (the writer's run trims the metrics past
    the checkpoint it restores, in StoreSink.on_start)."""
    job = store.get(job_id, refresh=False)
    if env.restart_count == 0:
        return job.status == "running"
    if job.status == "running":
        store.finish(job_id, "interrupted", "a rank failed; torchrun restarts the job")
    elif job.status != "interrupted":
        return False  # finished, cancelled or failed meanwhile: nothing to restart
    store.prepare_resume(job_id)
    store.claim(job_id, os.getppid())  # the job's process stays torchrun's agent, our parent
    print(f"job {job_id}: restart {env.restart_count}/{env.max_restarts}, resuming from its checkpoint", flush=True)
    return True


def _writer_payload(store: JobStore, job_id: str, env: DistEnv) -> WorkerPayload:
    if not _reclaim(store, job_id, env):
        return WorkerPayload(action="exit")
    job = store.get(job_id, refresh=False)
    resume = RunContext(job_id, job.recipe, job.job_dir, NullSink()).checkpoint_path.is_file()
    return WorkerPayload(action="run", job_id=job_id, recipe=job.recipe, config=job.config, resume=resume)


def _file_digest(path: Path) -> bytes:
    """sha256 of a file (b"" when it is missing), read in chunks: checkpoints are hundreds of MB."""
    if not path.is_file():
        return b""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.digest()


def share_checkpoint(env: DistEnv, path: str | Path) -> None:
    """Make the writer's checkpoint the one at `path` on every rank (other machines get a copy).

    Compared by content, not existence: a machine without a shared file system keeps the copy it
    received at an earlier resume, and restoring that stale one would put its ranks at another step."""
    path = Path(path)
    wanted = distributed.broadcast_bytes(_file_digest(path) if env.is_writer else None, env.writer_rank)
    stale = (not env.is_writer) and _file_digest(path) != wanted
    if float(distributed.all_reduce_sum(torch.tensor([float(stale)], dtype=torch.float64))) == 0:
        return  # one machine, a shared file system, or copies already current: nothing to send
    received = distributed.broadcast_bytes(path.read_bytes() if env.is_writer else None, env.writer_rank)
    if stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".rank{env.rank}.tmp")
        tmp.write_bytes(received)
        os.replace(tmp, path)


def _owned(store: JobStore | None, job_id: str | None) -> tuple[JobStore, str]:
    """The writer rank's store and job: find_writer gives that rank only to the process that owns the job."""
    if store is None or job_id is None:
        raise RuntimeError("the writer rank went to a process that does not own the job")
    return store, job_id


def _local_sinks(env: DistEnv, store: JobStore | None, job_id: str) -> tuple[Any, TrainingSink]:
    """(the sink signals talk to, the sink the loop reports through)."""
    if not env.is_writer:
        local = StopFlagSink()
        return local, WriterRankSink(local, env)
    store_sink = StoreSink(_owned(store, job_id)[0].url, job_id)
    return store_sink, WriterRankSink(TeeSink(store_sink, ConsoleSink(every=50, stream=sys.stdout)), env)


def _outcome(env: DistEnv, result: Any, exc: BaseException | None, local: Any) -> tuple[str | None, str | None, int]:
    """(final status or None to leave the job running for a torchrun restart, error, exit code)."""
    if exc is None:
        status, error = final_status(result, local)
        return status, error, 0
    if distributed.is_peer_failure(exc):
        if env.restarts_left:
            return None, None, 1  # torchrun restarts every rank; the next writer resumes the job
        return "interrupted", f"a rank of the run stopped ({_short(exc)}); resume continues it", 1
    # A restart of a failed job finds it final and exits at once (see _reclaim).
    return "failed", str(exc) if isinstance(exc, DlguideError) else f"{type(exc).__name__}: {exc}", 1


def _short(exc: BaseException) -> str:
    """The first line of a collective's error, without the C++ source location."""
    return re.sub(r"^\[[^\]]*\]\s*", "", error_summary(exc)).split(". This is typically")[0]


def _train(env: DistEnv, payload: WorkerPayload, data: str | None, sink: TrainingSink) -> Any:
    recipe = get_recipe(payload["recipe"])
    config = {**payload["config"], **({"data": data} if data else {})}  # other machines name their own copy
    folder = job_dir(payload["job_id"])
    ctx = RunContext(payload["job_id"], payload["recipe"], folder, sink, resume=payload["resume"],
                     slot=process_slot(), dist=env)
    if ctx.resume:
        share_checkpoint(env, ctx.checkpoint_path)
    return recipe.run_function()(recipe.config_from_dict(config), ctx)


def _train_to_outcome(env: DistEnv, payload: WorkerPayload, data: str | None, local: Any,
                      sink: TrainingSink) -> tuple[str | None, str | None, int]:
    """Train, then judge the ending (_outcome) while the writer's store sink is still open: a stop by signal
    reads the store's cancel flag through it (stopping.final_status). Closed only then: closed first, a Slurm
    scancel's TERM made the writer rank fail on a closed store and leave its job running."""
    result, error = None, None
    try:
        try:
            with stop_on_signals(local):
                result = _train(env, payload, data, sink)
        except Exception as exc:  # the writer records it; every rank exits so torchrun can act
            traceback.print_exc()
            error = exc
        return _outcome(env, result, error, local)
    finally:
        if env.is_writer:
            local.close()


def run_worker(job_id: str | None, data: str | None = None) -> int:
    """Each torchrun process: `worker JOB_ID` on the job's machine, `worker --join DATA` elsewhere."""
    distributed.die_with_parent()
    env = DistEnv.from_env()
    distributed.join_group(env)
    store = open_store() if job_id else None
    try:
        env = replace(env, writer_rank=distributed.find_writer(env, owns_job=job_id is not None))
        payload = distributed.broadcast_json(_writer_payload(*_owned(store, job_id), env) if env.is_writer else None,
                                             env.writer_rank)
        try:  # the rendezvous has no authentication: whoever won the writer rank is checked (jobs.join_checks)
            payload = payload if env.is_writer else check_payload(payload, job_id)
        except DlguideError as exc:
            print(f"rank {env.rank}: {exc}", file=sys.stderr, flush=True)
            return 1
        if payload["action"] != "run":
            return 0
        status, message, code = _train_to_outcome(env, payload, data, *_local_sinks(env, store, payload["job_id"]))
        if env.is_writer and status:
            writer_store, owned_id = _owned(store, job_id)
            writer_store.finish(owned_id, status, message)
            print(f"job {owned_id} {status}" + (f": {message}" if message else ""), flush=True)
            if writer_store.get(owned_id, refresh=False).executor == "local":
                dispatch(writer_store)  # our slot is free: start the next queued job, as the job runner does
        return code
    finally:
        if store is not None:
            store.close()
        distributed.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    threads.declare("job")  # its environment came from torchrun, which inherited the launcher's (queue.job_env)
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--join":  # another machine of a multi-node run
        return run_worker(None, args[1])
    if len(args) != 1:
        print("usage: python -m dlguide_core.jobs.worker JOB_ID | --join DATA_DIR", file=sys.stderr)
        return 2
    return run_worker(args[0])


if __name__ == "__main__":
    sys.exit(main())
