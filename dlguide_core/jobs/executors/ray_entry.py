"""A dlguide job's entrypoint on a Ray node: `python -m dlguide_core.jobs.executors.ray_entry JOB_ID`.

Ray starts it when the job's entrypoint resources are free. It applies the AMD rule (jobs.executors.ray_amd)
before any GPU library starts, picks what the job runs on this node (the runner in-process, or torchrun over
N `jobs.worker` processes for a data-parallel job: jobs.launch, with this node's Python), and hands over to
the scheduler-neutral entry (jobs.executors.job_entry), which claims the job, forwards signals, and lets the
job record its own ending. Its output is Ray's job log.
"""

from __future__ import annotations

import os
import sys

from dlguide_core.jobs.executors.ray_amd import amd_visible_devices


def node_command(job_id: str) -> list[str]:
    """torchrun's command for a data-parallel job, built here (this node's Python); [] for one process.
    A store that cannot be read here gives [] too: job_entry then says so in its one line."""
    from dlguide_core.jobs.launch import launch_spec_from_config, torchrun_command
    from dlguide_core.jobs.store import JobStore

    try:
        job = JobStore().get(job_id, refresh=False)
    except Exception:  # noqa: BLE001 - job_entry reports an unreadable store in its own words
        return []
    spec = launch_spec_from_config(job.config)
    return torchrun_command(spec, job.id) if job.framework == "pytorch" and spec.uses_torchrun else []


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dlguide_core.jobs.executors.ray_entry JOB_ID", file=sys.stderr)
        return 2
    os.environ.update(amd_visible_devices(os.environ))  # before torch or any GPU library starts
    from dlguide_core.jobs.executors import job_entry

    command = node_command(args[0])
    return job_entry.main([args[0], *(["--", *command] if command else [])])


if __name__ == "__main__":
    sys.exit(main())
