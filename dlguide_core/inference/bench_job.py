"""A benchmark run off the script thread: the Compiled page starts one, reads its rows as each backend finishes,
and can stop it. Long work never runs in a page's script thread (a rerun or a closed tab would cut it short, and
the page could show nothing until it ended: issue 31 saw a 9-minute run with no partial results)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from dlguide_core.errors import DlguideError
from dlguide_core.inference import benchmark
from dlguide_core.inference.benchmark import BenchConfig, BenchRow, Watch
from dlguide_core.vision.models import LoadedModel


@dataclass(frozen=True)
class BenchProgress:
    """What a background benchmark has so far: its rows, what it is doing, and whether it has ended."""

    rows: tuple[BenchRow, ...]
    message: str
    fraction: float
    running: bool
    stopped: bool
    error: str | None = None


class BenchJob:
    """One benchmark on a daemon thread (its own thread count: dlguide_core.threads.apply_in_thread)."""

    def __init__(self, loaded: LoadedModel, config: BenchConfig, watch: Watch | None = None) -> None:
        self._loaded, self.config, self._watch = loaded, config, watch
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._rows: list[BenchRow] = []
        self._message, self._fraction = "Starting…", 0.0
        self._error: str | None = None
        self._thread = threading.Thread(target=self._run, name="dlguide-bench", daemon=True)

    def start(self) -> BenchJob:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the run to end: it stops before its next timed forward (a compile under way finishes first)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def progress(self) -> BenchProgress:
        with self._lock:
            return BenchProgress(tuple(self._rows), self._message, self._fraction, self._thread.is_alive(),
                                 self._stop.is_set(), self._error)

    def _run(self) -> None:
        from dlguide_core import threads

        threads.apply_in_thread()
        try:
            benchmark.run_benchmark(self._loaded, self.config, self._on_progress, on_row=self._on_row,
                                    should_stop=self._stop.is_set, watch=self._watch)
        except DlguideError as exc:
            self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must not die silently on a thread: the page shows it
            self._fail(f"{type(exc).__name__}: {exc}")

    def _on_progress(self, message: str, fraction: float) -> None:
        with self._lock:
            self._message, self._fraction = message, fraction

    def _on_row(self, row: BenchRow) -> None:
        with self._lock:
            self._rows.append(row)

    def _fail(self, error: str) -> None:
        with self._lock:
            self._error = error
