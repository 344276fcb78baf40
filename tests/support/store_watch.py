"""Following one job in a store that only other hosts reach (slurm_hosts' PostgreSQL on its bridge).

`python -m tests.support.store_watch JOB_ID` runs on such a host (SlurmHosts.popen_in) and prints one JSON line
each time the job's state changes: status, last step, checkpoint step, restarts, restart note, error. It folds
Slurm's view in as the dashboard does (tracking.sync, every few seconds), so a job that ended without a word is
seen too. Once the job is succeeded, failed or cancelled it prints a last line with `final`, the job's record
(`jobs show --json`'s) and every step and epoch number recorded, then exits. `JobWatch` reads the lines in the
test: `until(predicate)` waits for a line, with a deadline, one Python start for the whole test.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

POLL_S = 0.2
SYNC_EVERY_S = 3.0
FINAL = ("succeeded", "failed", "cancelled")


def _state(store: Any, job_id: str) -> dict[str, Any]:
    job = store.get(job_id, refresh=False)
    last = store.last_step(job_id) or {}
    return {"status": job.status, "step": last.get("step"), "checkpoint_step": job.checkpoint_step,
            "restarts": job.restarts, "restart_note": job.restart_note, "error": job.error,
            "external_id": job.external_id}


def watch(job_id: str) -> int:
    from dlguide_core.jobs.executors import tracking
    from dlguide_core.jobs.store import open_store

    store, seen, synced = open_store(), None, 0.0
    while True:
        if time.monotonic() - synced > SYNC_EVERY_S:
            tracking.sync(store, [store.get(job_id, refresh=False)])
            synced = time.monotonic()
        state = _state(store, job_id)
        if state["status"] in FINAL:
            print(json.dumps({**state, "final": True, "job": store.get(job_id, refresh=False).to_json(),
                              "steps": store.steps(job_id, extras=False)["step"],
                              "epochs": [row["epoch"] for row in store.epochs(job_id)]}), flush=True)
            return 0
        if state != seen:
            print(json.dumps(state), flush=True)
            seen = state
        time.sleep(POLL_S)


class JobWatch:
    """The test's side: the watcher's lines as they come (a reader thread), and waits on them."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.last: dict[str, Any] = {}
        self.lines: list[dict[str, Any]] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put("")

    def until(self, predicate: Callable[[dict[str, Any]], Any], timeout: float,
              what: str | Callable[[], str]) -> dict[str, Any]:
        """The first state (the current one included) for which `predicate` holds; AssertionError at the
        deadline or when the watcher ends first, naming `what` (a callable is asked only then) and the states."""
        deadline = time.monotonic() + timeout
        while not (self.last and predicate(self.last)):
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if not line:
                ended = "timed out" if line is None else "the watcher ended"
                raise AssertionError(f"{ended} after {timeout:.0f} s waiting for "
                                     f"{what() if callable(what) else what}; states seen: {self.lines[-8:]}")
            self.last = json.loads(line)
            self.lines.append({k: v for k, v in self.last.items() if k not in ("job", "steps", "epochs")})
        return self.last

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    sys.exit(watch(sys.argv[1]))
