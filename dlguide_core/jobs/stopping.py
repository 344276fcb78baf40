"""How a job process ends: signals stop the loop with a checkpoint, and the run's result names the final status.

Shared by the plain job process (jobs.runner) and each torchrun worker (jobs.worker).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dlguide_core.training.configs import RunResult

# Ctrl-C is a deliberate stop (cancelled); SIGTERM comes from shutdowns (interrupted, resumable).
SIGNAL_REASONS = {signal.SIGINT: "cancel", signal.SIGTERM: "SIGTERM"}


@contextmanager
def stop_on_signals(sink: Any) -> Iterator[None]:
    """While inside: SIGINT and SIGTERM call `sink.request_stop(reason)` (the loop checkpoints and returns)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (tests, embedded use)
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNAL_REASONS}
    for sig, reason in SIGNAL_REASONS.items():
        signal.signal(sig, lambda *_, reason=reason: sink.request_stop(reason))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def final_status(result: RunResult, sink: Any) -> tuple[str, str | None]:
    """(status, error) of a run that returned: done, cancelled, or interrupted by `sink.stop_reason`."""
    if result.status == "completed":
        return "succeeded", None
    if sink.stop_reason == "cancel" or _cancel_flag_set(sink):
        return "cancelled", None
    return "interrupted", f"stopped by {sink.stop_reason or 'request'} at step {result.step}; resume continues it"


def _cancel_flag_set(sink: Any) -> bool:
    """A cancel sets the store's flag, then a scheduler's TERM may arrive before the flag is polled
    (`scancel --signal=TERM`): the stop is still the cancel the user asked for."""
    check = getattr(sink, "cancel_was_requested", None)
    return bool(check and check())
