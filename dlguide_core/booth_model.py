"""Which model the booth shows (issue 44): DLGUIDE_KIOSK_WEIGHTS (settings.booth_weights_choice) puts a fine-tuned or
taught checkpoint on the booth instead of the ImageNet weights, and the booth's screen says which model it is.

`chosen_weights` resolves the setting (a checkpoint's path, or `job:ID` for that training job's newest checkpoint);
`booth.booth_weights` uses it first. `booth_model` describes the loaded model for the screen (its label, whether an
operator chose it, and the names a taught checkpoint was taught: dlguide_core.teach.save_taught_checkpoint).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.vision.models import LoadedModel

WEIGHTS_ENV = "DLGUIDE_KIOSK_WEIGHTS"
JOB_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")


def chosen_weights() -> str | None:
    """DLGUIDE_KIOSK_WEIGHTS resolved: the checkpoint's absolute path, the job's newest checkpoint
    (DLGUIDE_HOME/jobs/ID/*.pt) for `job:ID`; None when unset. A path that is not a file, a malformed id or a job
    without a checkpoint is a DlguideError in one line (serve.py stops before the port opens)."""
    raw = settings.booth_weights_choice()
    if not raw:
        return None
    if raw.startswith("job:"):
        from dlguide_core.jobs.job import job_dir

        job_id = raw[len("job:"):]
        if not JOB_ID.fullmatch(job_id):
            raise DlguideError(f"{WEIGHTS_ENV}={raw!r}: job:ID takes a job id from `dlguide jobs list`")
        found = sorted(job_dir(job_id).glob("*.pt"), key=lambda p: p.stat().st_mtime, reverse=True)
        if not found:
            raise DlguideError(f"{WEIGHTS_ENV}={raw}: job {job_id} has no checkpoint (yet) under "
                               f"{job_dir(job_id)}")
        return str(found[0])
    path = Path(raw).expanduser()
    if not path.is_file():
        raise DlguideError(f"{WEIGHTS_ENV}={raw}: no such checkpoint file")
    return str(path.resolve())


@dataclass(frozen=True)
class BoothModel:
    """Which model the booth shows, for its screen: the weights source, the model's label, whether the operator
    chose it (DLGUIDE_KIOSK_WEIGHTS), its class count and the names a taught checkpoint was taught."""

    weights: str
    label: str
    from_env: bool
    classes: int
    taught_names: tuple[str, ...]

    def describe(self) -> str:
        """One line for the screen: "Model: LABEL, N classes (taught: a, b)"."""
        taught = f" (taught: {', '.join(self.taught_names)})" if self.taught_names else ""
        chosen = ", chosen by this booth's operator" if self.from_env else ""
        return f"Model: {self.label}, {self.classes} classes{taught}{chosen}"


_TAUGHT_NAMES: dict[str, tuple[str, ...]] = {}  # a model's fingerprint -> its taught names (read once per model)


def booth_model(loaded: LoadedModel) -> BoothModel:
    """`loaded` (the booth's model) described for the screen."""
    taught = _TAUGHT_NAMES.get(loaded.fingerprint)
    if taught is None:
        taught = ()
        if loaded.source not in ("imagenet", "none") and os.path.isfile(loaded.source):
            from dlguide_core.vision.checkpoints import load_checkpoint

            try:
                taught = tuple(str(n) for n in load_checkpoint(loaded.source).get("taught_names", ()))
            except DlguideError:
                taught = ()
        _TAUGHT_NAMES[loaded.fingerprint] = taught
    return BoothModel(loaded.source, loaded.label, bool(settings.booth_weights_choice()), len(loaded.class_names),
                      taught)
