"""What torchrun's failure summary in a job log says: which rank failed first, and how."""

from __future__ import annotations


def torchrun_root_cause(lines: list[str]) -> str | None:
    """From torchrun's failure summary ("Root Cause (first observed failure): ... rank : 1 ...
    exitcode : -9 (pid: 4144) (SIGKILL)"), e.g. "rank 1 (local_rank: 1) exitcode -9 (pid: 4144) (SIGKILL)"."""
    try:
        start = max(i for i, line in enumerate(lines) if line.startswith("Root Cause"))
    except ValueError:
        return None
    fields = {}
    for line in lines[start + 1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("rank", "exitcode"):
            fields[key.strip()] = value.strip()
    if "rank" not in fields:
        return None
    return f"rank {fields['rank']}" + (f" exitcode {fields['exitcode']}" if "exitcode" in fields else "")
