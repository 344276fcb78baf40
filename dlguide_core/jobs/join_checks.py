"""What a rank of a distributed job accepts from the writer rank (issue 22).

c10d's rendezvous has no authentication: whoever reaches the endpoint can join the run, and a joined process
can claim the writer rank and send every other rank its "payload" (jobs.worker). So no rank but the writer
trusts it: the job id must look like one the store makes (it names a folder under DLGUIDE_HOME/jobs, where the
checkpoint is written), a rank on the job's machine only runs its own job, the recipe must be a registered
training recipe, and weights to start from are "imagenet", "none" or a file under DLGUIDE_HOME. The dataset is
never taken from the payload on another machine (`--join DATA` names its own copy). docs/DISTRIBUTED.md says
what this does not cover.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypedDict

from dlguide_core import settings
from dlguide_core.errors import DistributedError
from dlguide_core.jobs.job import job_dir
from dlguide_core.training.recipes import get_recipe, recipes

# JobStore.create's ids: time.strftime("%Y%m%d-%H%M%S") + "-" + 8 hex digits
JOB_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")
WEIGHT_NAMES = ("imagenet", "none")


class WorkerPayload(TypedDict, total=False):
    """What the writer rank broadcasts to every rank (jobs.worker), as JSON: {"action": "exit"}, or "run"
    with the rest."""

    action: str  # "run" or "exit"
    job_id: str
    recipe: str
    config: dict[str, Any]
    resume: bool  # from the job's checkpoint


def _refuse(why: str) -> DistributedError:
    return DistributedError(f"refusing the writer rank's instructions: {why}")


def check_payload(payload: Any, own_job_id: str | None) -> WorkerPayload:
    """`payload` when a non-writer rank may act on it; DistributedError (one line) otherwise. `own_job_id`:
    the job this rank was started for (None on another machine, `worker --join`)."""
    if not isinstance(payload, dict) or payload.get("action") not in ("run", "exit"):
        raise _refuse("not a dlguide worker payload")
    if payload["action"] == "exit":
        return WorkerPayload(action="exit")
    job_id = payload.get("job_id")
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise _refuse(f"job id {str(job_id)[:40]!r} is not one dlguide makes")
    if own_job_id is not None and job_id != own_job_id:
        raise _refuse(f"this rank runs job {own_job_id}, not {job_id}")
    recipe = payload.get("recipe")
    found = get_recipe(recipe) if isinstance(recipe, str) and recipe in recipes() else None
    if found is None or found.framework != "pytorch":
        raise _refuse(f"recipe {str(recipe)[:40]!r} is not a PyTorch training recipe here")
    config = payload.get("config")
    if not isinstance(config, dict) or not isinstance(payload.get("resume"), bool):
        raise _refuse("config or resume flag of the wrong type")
    _check_weights(config.get("weights", "none"))
    home = settings.home()
    if home not in job_dir(job_id).resolve().parents:  # a symlinked jobs/ folder pointing elsewhere
        raise _refuse(f"job folder of {job_id} is outside DLGUIDE_HOME")
    return WorkerPayload(action="run", job_id=job_id, recipe=found.name, config=config, resume=payload["resume"])


def _check_weights(weights: Any) -> None:
    if weights in WEIGHT_NAMES:
        return
    if not isinstance(weights, str):
        raise _refuse("weights of the wrong type")
    home = settings.home()
    resolved = Path(weights).expanduser().resolve()
    if home not in resolved.parents:
        raise _refuse(f"weights {weights[:80]!r} are outside DLGUIDE_HOME ({home})")
