"""The AMD rule for Ray: Slurm's ROCR_VISIBLE_DEVICES alone is refused by Ray 2.60; HIP_VISIBLE_DEVICES fixes it.

Slurm binds AMD GPUs with ROCR_VISIBLE_DEVICES; Ray 2.60 refuses to run where only that variable is set
(ray/_private/accelerators/amd_gpu.py: "Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES",
raised by `ray start` on a node with AMD GPUs and in every GPU worker). HIP numbers the devices ROCr lets
through from 0, so HIP_VISIBLE_DEVICES=0..n-1 beside an unchanged ROCR_VISIBLE_DEVICES (n devices) names
exactly the GPUs Slurm gave: Slurm's binding is kept, and Ray then narrows HIP_VISIBLE_DEVICES per worker
within it. `python -m dlguide_core.jobs.executors.ray_amd` prints the `export` line for a node's
`ray start` (docs/CLUSTERS.md); the job's entrypoint (jobs.executors.ray_entry) applies the same rule.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping

ROCR, HIP = "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"


def amd_visible_devices(environ: Mapping[str, str]) -> dict[str, str]:
    """{HIP_VISIBLE_DEVICES: "0,..,n-1"} when only ROCR_VISIBLE_DEVICES (n devices) is set; else {}."""
    rocr = environ.get(ROCR)
    if rocr is None or HIP in environ:
        return {}
    devices = [d for d in rocr.split(",") if d.strip()]
    return {HIP: ",".join(str(i) for i in range(len(devices)))}


def export_lines(environ: Mapping[str, str]) -> list[str]:
    """Shell lines that apply the rule before `ray start` (none when it does not apply)."""
    return [f"export {name}={shlex.quote(value)}" for name, value in amd_visible_devices(environ).items()]


def main() -> int:
    """Print the `export` lines a node needs before `ray start` (`eval "$(python -m ...ray_amd)"`)."""
    for line in export_lines(os.environ):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
