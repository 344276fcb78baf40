"""The executor contract: how a job is handed to whatever runs it, watched, read, stopped and resumed.

In the shape of TorchX's scheduler interface (submit, describe, log_iter, cancel), over dlguide's job store.
An executor is a class deriving `Executor`, declared once by name in `jobs.executors.registry` (the registry
imports it lazily from its "module:Class" string, so a missing module is a state, not a crash).

The contract, for anyone writing one (`local`, `slurm`, `ray`):

- `name` ("local", "slurm", "ray") is what the store's `executor` column holds and what `--executor` takes;
  the registry declares it once with its label, the Train page's "Run on" text ("This machine", "Slurm", "Ray").
- `options_cls` is a frozen dataclass of the executor's own settings, every field with a default. Its field
  names are the CLI's argparse `dest`s (`--partition` -> `partition`, `--ray-address` -> `ray_address`): the
  CLI and the page fill it generically (`options_from(...)`). Options are kept in the job folder
  (`save_options`/`load_options`, `executor.json`) so that `resume` submits with the same settings.
- `available()` -> `Availability(ok, reason)`, quick (no network call that can hang: a timeout of a few seconds
  at most). `reason` is one line for the page's disabled choice, e.g. "`sbatch` is not on PATH".
- `submit(store, recipe, config, options, owner=None)` -> `Job` is written once, here (a template): the recipe,
  its config's type (ConfigError), the executor's `check(config, options)` hook (its own refusals, a
  `DlguideError` subclass with one line, nothing left queued; it returns the options as resolved), the row
  (`store.create(..., executor=self.name, owner=owner or ownership.os_user())`: `owner` is the app's signed-in
  user), the options saved, then `hand_over(store, job, options)`: the executor gives the row to its scheduler,
  records the scheduler's id with `store.set_external(job.id, self.name, external_id)` (a string), and returns
  `store.get(job.id, refresh=False)`. If the hand-over fails after the row exists, it finishes the job `failed`
  with the one-line reason and raises it. The store URL reaches the job through the environment
  (`DLGUIDE_STORE_URL`, `DLGUIDE_HOME`), never argv (it may hold a password).
- The job process, wherever it runs, is `python -m dlguide_core.jobs.executors.job_entry JOB_ID [-- COMMAND...]`:
  it claims the job (queued -> running, records pid, host and boot id), runs it (the runner in-process, or
  COMMAND, e.g. srun + torchrun, as a child it forwards TERM/INT to), and the job records its own final status.
  A TERM is the checkpointed stop (-> `interrupted`, resumable); the store's cancel flag -> `cancelled`.
  Two hooks run there, the job's executor's `NodeHooks` (the row's `executor`, jobs.executors.node_hooks):
  `claim` (the base: queued -> running; Slurm: a requeued job taken back) and `judge_stop` (the base: none;
  Slurm: who stopped it), so job_entry itself names no scheduler.
- `status(job)` -> `ExternalStatus(status, reason, state)`: the scheduler's view of the job, mapped onto
  dlguide's statuses (`jobs.store.STATUSES`); `state` is the scheduler's own word ("PENDING"), `reason` one line
  or None. It must return within a few seconds: every command or request has a timeout, and a scheduler that
  does not answer raises `SchedulerNotAnswering` ("Slurm is not answering"). `None` status means "no opinion,
  keep the store's" (e.g. the scheduler no longer knows the job). `jobs.executors.tracking.sync` calls it for
  every queued or running job of a non-local executor and applies it only where the job process could not speak
  for itself: a terminal state while the store still says queued/running.
- `cancel(store, job)` -> `Job`: a queued job becomes `cancelled` at once; a running one gets the store's cancel
  flag (`store.request_cancel`) and the scheduler's gentle stop (TERM, never a kill first), then stops with a
  checkpoint at its next step.
- `resume(store, job_id)` -> `Job`: by default `store.prepare_resume` then hand the same job over again with its
  saved options (a new external id); the run continues from its checkpoint.
- `log_file(job)` -> `Path`: the file its output goes to (local: job.log; Slurm: the batch output file, kept
  in the job folder). `logs(job, follow, is_final)` yields its lines; with `follow`, until `is_final()`.
  The base class implements both over `log_file`; override `logs` only for logs that are not a file here.
- Errors: every user-facing failure is a `DlguideError` subclass with a one-line message (CLI exit 1 or 2,
  the page's st.error). Never raise a bare exception for a tool that is missing or a scheduler that is down.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, NamedTuple, TypeAlias, TypeVar

from dlguide_core.errors import DlguideError
from dlguide_core.jobs.store import ACTIVE, Job, JobStore, job_dir
from dlguide_core.training.configs import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from dlguide_core.training.recipes import Recipe, RecipeConfig

OPTIONS_FILE = "executor.json"  # in the job folder: the options a resume submits with
# After the store says a followed job ended: its last lines are printed just after (jobs.runner.main)
FOLLOW_SETTLE_S, FOLLOW_SETTLE_MAX_S = 1.0, 10.0


# An executor's own settings: a frozen dataclass, every field with a default (see the module docstring)
OptionsT = TypeVar("OptionsT", bound="DataclassInstance")
ExecutorOptions: TypeAlias = "DataclassInstance"  # any executor's options, for the core's clients (ui.executors)


class SchedulerNotAnswering(DlguideError):
    """A scheduler command timed out or its controller is down; jobs keep their last known state."""


class ExecutorUnavailable(DlguideError):
    """The executor's tools or service are missing here (the reason says which)."""


class Availability(NamedTuple):
    """`ok, reason = executor.available()`; reason is one line when not ok."""

    ok: bool
    reason: str | None = None


@dataclass(frozen=True)
class ExternalStatus:
    """A scheduler's view of one job: a dlguide status (or None: no opinion), why, and the scheduler's word."""

    status: str | None
    reason: str | None = None
    state: str = ""


@dataclass(frozen=True)
class NoOptions:
    """An executor without settings of its own."""


class Executor(ABC, Generic[OptionsT]):
    """Base of every executor, generic in its options type; see the module docstring for the contract.

    `submit` is the template (recipe lookup, config check, store row, options saved, hand-over: once, here);
    an executor fills the hooks: `check` (its own refusals, its options resolved), `hand_over`, `status`,
    `cancel`, `available`. Its part in the job's own process on a node is a `NodeHooks` (jobs.executors.node_hooks)."""

    name: ClassVar[str] = ""
    # train flags (argparse dests) this executor refuses, with the one-line reason
    refused_flags: ClassVar[Mapping[str, str]] = {}
    options_cls: type[OptionsT]

    @abstractmethod
    def available(self) -> Availability:
        """Whether it can be used here, quickly (see the module docstring)."""

    @abstractmethod
    def status(self, job: Job) -> ExternalStatus:
        """The scheduler's view of `job`, within a few seconds."""

    @abstractmethod
    def cancel(self, store: JobStore, job: Job) -> Job:
        """The store's cancel flag and the scheduler's gentle stop."""

    @abstractmethod
    def hand_over(self, store: JobStore, job: Job, options: OptionsT) -> Job:
        """Give an existing queued row to the scheduler (submit's last step, and resume's)."""

    def check(self, recipe: Recipe, config: RecipeConfig, options: OptionsT) -> OptionsT:
        """Refuse what this executor cannot run (a `DlguideError`, one line, before anything is queued) and
        return the options as the job keeps them (resolved from the environment). None refused here."""
        return options

    def submit(self, store: JobStore, recipe: str, config: RecipeConfig, options: OptionsT | None = None,
               owner: str | None = None) -> Job:
        """The submit steps, once for every executor: the recipe, its config's type, this executor's own check,
        the store's row (as `owner`, else the OS user), the options kept for resume, then the hand-over."""
        from dlguide_core.jobs.catalog import get_recipe
        from dlguide_core.jobs.ownership import os_user

        found = get_recipe(recipe)
        if not isinstance(config, found.config_cls):
            raise ConfigError(f"{recipe} takes a {found.config_cls.__name__}, not {type(config).__name__}")
        kept = self.check(found, config, options if options is not None else self.options_cls())
        job = store.create(recipe, found.framework, asdict(config), executor=self.name, owner=owner or os_user())
        save_options(job.id, kept)
        return self.hand_over(store, job, kept)

    def submit_warnings(self, options: OptionsT | None = None) -> tuple[str, ...]:
        """One-line warnings to show before submitting (e.g. nodes that cannot reach the store); none here."""
        return ()

    def resume(self, store: JobStore, job_id: str) -> Job:
        job = store.prepare_resume(job_id)
        return self.hand_over(store, job, load_options(job.id, self.options_cls))

    def log_file(self, job: Job) -> Path:
        return job.log_path

    def logs(self, job: Job, follow: bool = False, is_final: Callable[[], bool] | None = None,
             poll_s: float = 0.5) -> Iterator[str]:
        """The log's lines; with `follow`, keep reading until `is_final()` says the job ended (the caller knows
        the store: the CLI asks it after `tracking.sync`), then the rest. No `is_final`: follow until closed."""
        yield from follow_file(lambda: self.log_file(job), follow, poll_s, is_final or (lambda: False))


class NodeHooks:
    """An executor's part in the job's own process on a node (jobs.executors.job_entry), found by the job's
    executor in jobs.executors.node_hooks: `claim` and `judge_stop`. This base is every executor's default."""

    def claim(self, store: JobStore, job_id: str) -> bool:
        """Take the queued job (queued -> running, this pid). False: the job is not to run here (it says why);
        JobError: cancelled meanwhile, or running elsewhere."""
        store.claim(job_id, os.getpid())
        return True

    def judge_stop(self, store: JobStore, job_id: str, status: str, error: str | None,
                   signalled: bool = True) -> tuple[str, str | None]:
        """After a run stopped (`status` cancelled or interrupted): who stopped it, as (status, reason). "queued":
        the scheduler runs the same job again. No judgement here: as it stopped."""
        return status, error


def options_from(options_cls: type[OptionsT], values: Mapping[str, object]) -> OptionsT:
    """`options_cls` filled from `values` (argparse's namespace as a dict, a form): its own fields only,
    None meaning the default."""
    names = {f.name for f in fields(options_cls)}
    return options_cls(**{k: v for k, v in values.items() if k in names and v is not None})


def save_options(job_id: str, options: DataclassInstance) -> None:
    path = job_dir(job_id) / OPTIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(options)))


def load_options(job_id: str, options_cls: type[OptionsT]) -> OptionsT:
    try:
        data = json.loads((job_dir(job_id) / OPTIONS_FILE).read_text())
    except (OSError, ValueError):
        data = {}
    return options_from(options_cls, data)


def is_active(job: Job) -> bool:
    return job.status in ACTIVE


def follow_file(path_of: Callable[[], Path], follow: bool, poll_s: float,
                is_final: Callable[[], bool], settle_s: float = FOLLOW_SETTLE_S) -> Iterator[str]:
    """Lines of the file `path_of()` names (it may not exist yet); with `follow`, tail it until `is_final()`
    and then read what is left. A job records its ending in the store before it prints its last line
    ("job ID succeeded") and exits, so after `is_final()` the tail goes on until the file has been quiet for
    `settle_s` (FOLLOW_SETTLE_MAX_S at most)."""
    position, partial = 0, 0  # bytes yielded; bytes of an unfinished last line seen (not yielded yet)
    ended_at: float | None = None  # when is_final() first said so
    quiet_since = 0.0  # when the file last grew after that
    while True:
        if ended_at is None and (not follow or is_final()):  # asked before reading: the last lines come after
            ended_at = quiet_since = time.monotonic()
        try:
            with open(path_of(), "rb") as fh:
                fh.seek(position)
                chunk = fh.read()
        except OSError:
            chunk = b""
        now, grew, partial = time.monotonic(), len(chunk) > partial, len(chunk)
        if ended_at is not None and grew:
            quiet_since = now
        final = ended_at is not None and (not follow or now - quiet_since >= settle_s
                                          or now - ended_at >= FOLLOW_SETTLE_MAX_S)
        complete = chunk if final else chunk[:chunk.rfind(b"\n") + 1]
        if complete:
            position += len(complete)
            partial -= len(complete)
            yield from complete.decode("utf-8", "replace").splitlines()
        if final:
            return
        time.sleep(poll_s if ended_at is None else min(poll_s, settle_s / 4))
