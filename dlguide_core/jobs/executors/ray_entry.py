"""A dlguide job's entrypoint on a Ray node: `python -m dlguide_core.jobs.executors.ray_entry JOB_ID`.

Ray starts it when the job's resources are free. It applies the AMD rule (jobs.executors.ray_env), claims
the job in the store (queued -> running; a job cancelled while Ray held it pending ends here, having
run nothing), then runs what a local job runs: the job runner in this process, or torchrun over N
`jobs.worker` processes for a data-parallel job (jobs.launch). Its output is Ray's job log. The exit
code is the runner's: 0 only when the job succeeded (the store says what else happened).
"""

from __future__ import annotations

import os
import subprocess
import sys

from dlguide_core.jobs.executors.ray_env import amd_visible_devices


def _run_torchrun(job) -> int:
    from dlguide_core.jobs.launch import launch_spec_from_config, torchrun_command

    proc = subprocess.Popen(torchrun_command(launch_spec_from_config(job.config), job.id), stdin=subprocess.DEVNULL)
    return proc.wait()  # Ray's stop signals every process of the job (torchrun and its workers) itself


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dlguide_core.jobs.executors.ray_entry JOB_ID", file=sys.stderr)
        return 2
    os.environ.update(amd_visible_devices(os.environ))  # before torch or any GPU library starts
    from dlguide_core.jobs.launch import launch_spec_from_config
    from dlguide_core.jobs.store import JobError, JobStore

    store, job_id = JobStore(), args[0]
    try:
        job = store.claim(job_id, os.getpid())
    except JobError as exc:  # cancelled (or resumed elsewhere) while Ray held it pending
        print(f"job {job_id}: nothing to run ({exc})", flush=True)
        return 0
    print(f"job {job_id} running on Ray in process {os.getpid()} on {os.uname().nodename}", flush=True)
    if job.framework == "pytorch" and launch_spec_from_config(job.config).uses_torchrun:
        code = _run_torchrun(job)
        print(f"job {job_id} {store.get(job_id, refresh=False).status}", flush=True)
        return code
    from dlguide_core.jobs.runner import run_job
    from dlguide_core.training.sinks import ConsoleSink

    status = run_job(store, job_id, ConsoleSink(every=1, stream=sys.stdout))
    print(f"job {job_id} {status}", flush=True)
    return 0 if status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
