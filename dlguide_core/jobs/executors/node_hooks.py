"""Which `NodeHooks` a job's own process on a node uses: its executor's, by the name in its row (issue 45).

jobs.executors.job_entry runs every scheduler's job and names none; it asks here. This table stands apart from
jobs.executors.registry on purpose: the registry names the executors' submit sides, which write the command lines
that start job_entry (a batch script, a Ray entrypoint), so job_entry reaching the registry would close a circle.
Each entry is "module:Class", imported only when a job of that executor runs; an executor without an entry gets
the base (claim: queued -> running; judge_stop: as it stopped).
"""

from __future__ import annotations

import importlib

from dlguide_core.jobs.executors.base import NodeHooks

HOOKS: dict[str, str] = {  # executor name (the store's `executor` column) -> its NodeHooks, "module:Class"
    "slurm": "dlguide_core.jobs.executors.slurm_node:SlurmNode",
}


def for_executor(name: str) -> NodeHooks:
    """The hooks of executor `name`: its own where HOOKS names them, else the base's."""
    entry = HOOKS.get(name)
    if entry is None:
        return NodeHooks()
    module, _, attr = entry.partition(":")
    hooks: type[NodeHooks] = getattr(importlib.import_module(module), attr)
    return hooks()
