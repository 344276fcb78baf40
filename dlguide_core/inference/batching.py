"""One inference worker per served model: every session's requests are queued and run together, as one batch.

A request is a block of preprocessed rows (B, 3, crop, crop) from one visitor. The worker takes the oldest
requests whose rows fit in `BatchLimits.max_batch`, waits at most `max_wait_ms` (from the oldest request's arrival)
for more to fill the batch, runs one forward, and hands each request its own rows of the logits with the batch
size and the time it queued (Triton's dynamic batcher, TorchServe's batch_size/max_batch_delay, Gradio's
max_batch_size). Requests that arrive while a forward runs form the next batch, so under load batches grow by
themselves and a lone visitor is answered at once.

Why a thread, not a process: ONNX Runtime's and torch's forwards release the GIL, so the script threads keep
running beside it; a worker process would hold a second copy of the model (the booth's memory bound) and copy
every batch both ways. The worker thread holds the GIL only to stack the rows and split the logits.

Each batch (and each task, e.g. Grad-CAM) takes one of the process's forward slots (`classify.forward_slot`,
DLGUIDE_MAX_FORWARDS): the gate now bounds batches in flight across all workers, never visitors one by one.
Tasks run alone between two batches: a Grad-CAM delays others' predictions by at most itself.

A forward that raises is retried request by request, so one visitor's bad input fails only that visitor. A
worker thread that dies answers every waiting request with a WorkerError at once (no hang), and the next request
starts a new thread. No streamlit here: the booth and the Classify page share this through ui.cache.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch

from dlguide_core import settings, threads
from dlguide_core.errors import DlguideError, error_summary
from dlguide_core.inference.backend_base import Outputs

# (B, 3, H, W) -> (B, C) float32 logits on the CPU, or both heads (logits and the pooled features: the booth's,
# issue 44)
Forward = Callable[[torch.Tensor], "torch.Tensor | Outputs"]
Gate = Callable[[], AbstractContextManager[object]]
T = TypeVar("T")
DEFAULT_TIMEOUT_S = 600.0  # a request's longest wait for its answer: a cold CPU compile is minutes, never a hang


class WorkerError(DlguideError):
    """A request the worker could not answer (its forward failed, or the worker stopped): one line."""


@dataclass(frozen=True)
class BatchLimits:
    max_batch: int = settings.DEFAULT_MAX_BATCH  # rows per forward (DLGUIDE_MAX_BATCH)
    max_wait_ms: float = settings.DEFAULT_BATCH_WAIT_MS  # how long the oldest request waits for others

    @classmethod
    def from_env(cls, *, on_gpu: bool) -> BatchLimits:
        """DLGUIDE_MAX_BATCH (its default depends on where the model runs) and DLGUIDE_BATCH_WAIT_MS
        (dlguide_core.settings)."""
        return cls(settings.max_batch(on_gpu=on_gpu), settings.batch_wait_ms())


@dataclass(frozen=True)
class Answer:
    """One request's own rows of a batch's logits, and what it saw."""

    logits: torch.Tensor  # (rows, C)
    batch_size: int  # rows in the forward that answered it (its own and other visitors')
    queued_ms: float  # from its arrival to its batch's start
    forward_ms: float  # its batch's forward
    features: torch.Tensor | None = None  # (rows, D) pooled features, when the forward gives both heads


@dataclass(frozen=True)
class WorkerStats:
    batches: dict[int, int]  # batch size -> forwards run at that size
    restarts: int  # worker threads that died and were replaced


@dataclass(eq=False)
class _Request(Generic[T]):
    rows: torch.Tensor  # empty for a task
    task: Callable[[], T] | None = None
    arrived: float = field(default_factory=time.perf_counter)
    done: threading.Event = field(default_factory=threading.Event)
    answer: Answer | None = None
    result: T | None = None
    error: str | None = None

    def finish(self, *, answer: Answer | None = None, result: T | None = None, error: str | None = None) -> None:
        self.answer, self.result, self.error = answer, result, error
        self.done.set()


def _no_gate() -> AbstractContextManager[object]:
    from contextlib import nullcontext

    return nullcontext()


class InferenceWorker:
    """Batches `forward` over every caller's requests, in one daemon thread (see the module doc)."""

    def __init__(self, forward: Forward, limits: BatchLimits | None = None, *, name: str = "inference",
                 gate: Gate = _no_gate) -> None:
        self.forward, self.limits, self.name, self.gate = forward, limits or BatchLimits(), name, gate
        self._cond = threading.Condition()
        self._rows: deque[_Request] = deque()
        self._tasks: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._thread: threading.Thread | None = None
        self._batches: Counter[int] = Counter()
        self._restarts = 0

    def infer(self, rows: torch.Tensor, timeout_s: float = DEFAULT_TIMEOUT_S) -> Answer:
        """Logits for `rows` (B, 3, H, W), run in a batch with whatever else is queued."""
        if rows.dim() != 4 or rows.shape[0] < 1:
            raise WorkerError(f"expected a (B, 3, H, W) batch, got shape {tuple(rows.shape)}")
        request: _Request = _Request(rows.detach().cpu())
        self._wait(self._submit(request, self._rows), timeout_s)
        assert request.answer is not None
        return request.answer

    def call(self, task: Callable[[], T], timeout_s: float = DEFAULT_TIMEOUT_S) -> T:
        """Run `task` (e.g. a Grad-CAM) in the worker, alone, between two batches; its exceptions are raised."""
        request: _Request[T] = _Request(torch.empty(0), task)
        self._wait(self._submit(request, self._tasks), timeout_s)
        return request.result  # type: ignore[return-value]  # set by a successful run

    def queued_rows(self) -> int:
        """Rows waiting for a batch (not the one running)."""
        with self._cond:
            return sum(len(r.rows) for r in self._rows)

    def stats(self) -> WorkerStats:
        with self._cond:
            return WorkerStats(dict(sorted(self._batches.items())), self._restarts)

    def _submit(self, request: _Request, queue: deque[_Request]) -> _Request:
        with self._cond:
            queue.append(request)
            if self._thread is None:  # first use, or the last thread died: a new one takes the queue
                self._thread = threading.Thread(target=self._loop, name=f"dlguide-{self.name}", daemon=True)
                self._thread.start()
            self._cond.notify()
        return request

    def _wait(self, request: _Request, timeout_s: float) -> None:
        if not request.done.wait(timeout_s):
            raise WorkerError(f"no answer from the {self.name} worker in {timeout_s:.0f} s; try again")
        if request.error is not None:
            raise WorkerError(request.error)
        if isinstance(request.result, BaseException):
            raise request.result

    def _loop(self) -> None:
        threads.apply_in_thread()  # the process's thread policy (OpenMP keeps its thread count per calling thread)
        try:
            task_turn = False  # tasks and batches take turns while both wait
            while True:
                work = self._next(task_turn)
                task_turn = work[0].task is None
                self._run(work)
        finally:  # reached only when the thread dies (the loop never ends otherwise)
            self._died()

    def _next(self, task_turn: bool) -> list[_Request]:
        with self._cond:
            while not self._rows and not self._tasks:
                self._cond.wait()
            if self._tasks and (task_turn or not self._rows):
                self._running = [self._tasks.popleft()]
                return self._running
            deadline = self._rows[0].arrived + self.limits.max_wait_ms / 1000
            while sum(len(r.rows) for r in self._rows) < self.limits.max_batch:
                left = deadline - time.perf_counter()
                if left <= 0 or not self._cond.wait(left):
                    break
            self._running = list(self._take_rows())
            return self._running

    def _take_rows(self) -> Iterator[_Request]:
        """The oldest requests whose rows fit in one batch (a request larger than that runs alone)."""
        total = 0
        while self._rows and (total == 0 or total + len(self._rows[0].rows) <= self.limits.max_batch):
            request = self._rows.popleft()
            total += len(request.rows)
            yield request

    def _run(self, work: list[_Request]) -> None:
        if work[0].task is not None:
            self._run_task(work[0])
        else:
            self._run_batch(work, split_on_error=len(work) > 1)
        with self._cond:
            self._running = []

    def _run_task(self, request: _Request) -> None:
        try:
            with self.gate():
                result = request.task()  # type: ignore[misc]  # a task request always has one
        except Exception as exc:  # the caller raises it in its own thread
            request.finish(result=exc)
            return
        request.finish(result=result)

    def _run_batch(self, requests: list[_Request], *, split_on_error: bool) -> None:
        try:
            batch = torch.cat([r.rows for r in requests])
            with self.gate():  # waiting for a forward slot (another worker's batch) counts as queued
                start = time.perf_counter()
                out = self.forward(batch)
                logits, features = (out.logits, out.features) if isinstance(out, Outputs) else (out, None)
                forward_ms = (time.perf_counter() - start) * 1000
        except Exception as exc:
            if split_on_error:  # whose input broke it? each alone: only that visitor gets the error
                for request in requests:
                    self._run_batch([request], split_on_error=False)
                return
            requests[0].finish(error=f"the model could not classify this image: {error_summary(exc)}")
            return
        with self._cond:
            self._batches[len(batch)] += 1
        offset = 0
        for request in requests:
            rows = len(request.rows)
            request.finish(answer=Answer(logits[offset:offset + rows], len(batch),
                                         (start - request.arrived) * 1000, forward_ms,
                                         None if features is None else features[offset:offset + rows]))
            offset += rows

    def _died(self) -> None:
        """Answer everything waiting with an error now; the next request starts a new thread."""
        with self._cond:
            waiting = [*self._running, *self._rows, *self._tasks]
            self._running, self._thread = [], None
            self._rows.clear()
            self._tasks.clear()
            self._restarts += 1
        for request in waiting:
            if not request.done.is_set():
                request.finish(error=f"the {self.name} worker stopped before answering; please try again")
