"""From submit to the first step visible in the job store: a job on a local Ray head against a local job.

The same tiny job (cifar_net or inception_v3 on a toy ImageFolder, CPU, no DataLoader workers) is submitted
alternately through the `local` executor (the queue's detached process) and the `ray` executor (Ray's job API,
entrypoint jobs.executors.ray_entry), for `--rounds` rounds; each run is timed from the submit call to the
first step a reader of the store sees, and the next run starts once the job's process has exited. The Ray
head is started once (its start-up time is reported apart), on loopback, with its own ports
(tests/support/ray_cluster.py), and stopped by its process group at the end.

    .venv/bin/python -m bench.bench_ray_submit [--recipe cifar_net] [--rounds 3] [--threads 1|inherit]
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import parser, report, result


def _first_step(store, job_id: str, started: float, timeout: float = 300.0) -> float:
    while time.monotonic() - started < timeout:
        if store.last_step(job_id):
            return time.monotonic() - started
        job = store.get(job_id, refresh=False)
        if job.status not in ("queued", "running"):
            raise RuntimeError(f"job {job_id} ended {job.status} before its first step: {job.error}")
        time.sleep(0.05)
    raise RuntimeError(f"no step of job {job_id} within {timeout:.0f} s")


def _wait_final(store, job_id: str, timeout: float = 300.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = store.get(job_id).status
        if status not in ("queued", "running"):
            return status
        time.sleep(0.2)
    raise RuntimeError(f"job {job_id} did not finish within {timeout:.0f} s")


def _settle(executor, store, job_id: str, timeout: float = 60.0) -> None:
    """Until the job's process has exited (the store's ending comes first), so runs do not overlap."""
    deadline = time.monotonic() + timeout
    job = store.get(job_id, refresh=False)
    while time.monotonic() < deadline:
        if executor.name == "ray":
            if executor.status(job).state in ("SUCCEEDED", "FAILED", "STOPPED"):
                return
        elif job.pid is None or _exited(job.pid):
            return
        time.sleep(0.2)


def _exited(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # our child (the queue launched it): unreaped
    except psutil.NoSuchProcess:
        return True


def _one(executor, store, recipe: str, cfg, options) -> float:
    started = time.monotonic()
    job = executor.submit(store, recipe, cfg, options)
    seconds = _first_step(store, job.id, started)
    if (status := _wait_final(store, job.id)) != "succeeded":
        raise RuntimeError(f"job {job.id} {status}")
    _settle(executor, store, job.id)
    return seconds


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--recipe", default="cifar_net", choices=("cifar_net", "inception_v3"))
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--threads", default="1", help="OMP_NUM_THREADS of both jobs (Ray gives its job 1 unless "
                         "set: without this the comparison measures thread counts on a busy box); 'inherit' leaves it")
    args = options.parse_args()
    if args.quick:
        args.rounds = 1
    home = Path(tempfile.mkdtemp(prefix="dlguide-bench-ray-"))
    os.environ.update(DLGUIDE_HOME=str(home), DLGUIDE_OFFLINE="1")
    if args.threads != "inherit":
        os.environ["OMP_NUM_THREADS"] = args.threads  # the local job inherits it; the Ray job gets it below
    from dlguide_core.jobs.catalog import get_recipe, register_job_kinds
    from dlguide_core.jobs.executors.ray import RayOptions
    from dlguide_core.jobs.executors.registry import get_executor
    from dlguide_core.jobs.store import JobStore
    from tests.support.ray_cluster import NO_PROXY, ray_available, start_head, stop_head
    from tests.support.toy_data import write_toy_dataset

    register_job_kinds()
    os.environ.update(NO_PROXY)
    size = 80 if args.recipe == "inception_v3" else 32
    data = write_toy_dataset(home / "toy", classes=2, per_class=6, val_per_class=1, size=size)
    extra = {"image_size": 75, "weights": "none"} if args.recipe == "inception_v3" else {}
    cfg = get_recipe(args.recipe).make_config(data=str(data), epochs=1, batch_size=2, workers=0, device="cpu",
                                              max_steps=3, **extra)
    no_ray = ray_available()
    if args.quick and no_ray is None:
        no_ray = "--quick: the local executor only (a Ray head's start is 15 s or more here; tests/jobs run Ray)"
    if no_ray:
        print(f"Ray not measured: {no_ray}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed bench still stops its head (finally below)
    head = None if no_ray else start_head()
    times: dict[str, list[float]] = {"local": [], "ray": []} if head else {"local": []}
    try:
        store = JobStore()
        for _ in range(args.rounds):
            times["local"].append(_one(get_executor("local"), store, args.recipe, cfg, None))
            if head:
                times["ray"].append(_one(get_executor("ray"), store, args.recipe, cfg, RayOptions(head.address)))
    finally:
        if head:
            stop_head(head)
    figures: dict[str, object] = {
        "recipe": args.recipe, "rounds": args.rounds, "omp_num_threads": args.threads,
        "ray_head_start_s": round(head.startup_s, 1) if head else None,
        **{f"{name}_first_step_s": {"median": round(statistics.median(v), 2), "min": round(min(v), 2),
                                    "max": round(max(v), 2)} for name, v in times.items()}}
    if head:
        figures["ray_over_local"] = round(statistics.median(times["ray"]) / statistics.median(times["local"]), 2)
    report(result("bench_ray_submit", figures), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
