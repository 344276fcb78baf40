"""The cross-visitor inference worker (dlguide_core.inference.batching): batched answers equal unbatched ones,
one visitor's bad input fails only that visitor, a dead worker answers its waiters and comes back. Every wait is
on an event or a queue length, never a sleep that races the worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import torch
from torch import nn

from dlguide_core.inference.batching import Answer, BatchLimits, InferenceWorker, WorkerError
from dlguide_core.vision.classify import top_k

CLASSES = [f"class {i}" for i in range(10)]


@pytest.fixture(scope="module")
def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.Linear(32, 10)).eval()


def held_forward(forward: Callable[[torch.Tensor], torch.Tensor]) -> tuple[Callable, threading.Event, list[int]]:
    """`forward` whose first call waits for `release`: the requests sent meanwhile queue up into one batch.
    Returns it, `release`, and the batch sizes it ran; `run.entered` is set once the first call holds the worker."""
    release, entered, sizes = threading.Event(), threading.Event(), []

    def run(batch: torch.Tensor) -> torch.Tensor:
        if not entered.is_set():
            entered.set()
            assert release.wait(60)
        sizes.append(len(batch))
        return forward(batch)
    run.entered = entered  # type: ignore[attr-defined]
    return run, release, sizes


def wait_queued(worker: InferenceWorker, rows: int) -> None:
    deadline = time.monotonic() + 60
    while worker.queued_rows() < rows:
        assert time.monotonic() < deadline, "requests never reached the queue"
        time.sleep(0.005)


def in_threads(calls: list[Callable[[], object]]) -> list[object]:
    """Run each call in its own thread; its return value or exception, in order."""
    out: list[object] = [None] * len(calls)

    def one(i: int) -> None:
        try:
            out[i] = calls[i]()
        except Exception as exc:
            out[i] = exc
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


@torch.inference_mode()
def test_batched_answers_equal_unbatched_per_row(net: nn.Module) -> None:
    forward, release, sizes = held_forward(net)
    worker = InferenceWorker(forward, BatchLimits(max_batch=8, max_wait_ms=0))
    torch.manual_seed(1)
    first, rest = torch.randn(1, 3, 32, 32), [torch.randn(n, 3, 32, 32) for n in (1, 2, 1, 3)]
    blocker = threading.Thread(target=worker.infer, args=(first,))
    blocker.start()
    assert forward.entered.wait(60)  # the first visitor's forward holds the worker
    pending = [lambda rows=rows: worker.infer(rows) for rows in rest]
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.extend(in_threads(pending)))
    runner.start()
    wait_queued(worker, 7)  # every later visitor is waiting while the first forward runs
    release.set()
    runner.join(60)
    blocker.join(60)
    assert sizes == [1, 7]  # the first alone, then the other four visitors' seven rows as one batch
    for rows, answer in zip(rest, results):
        assert isinstance(answer, Answer) and answer.batch_size == 7 and answer.logits.shape == (len(rows), 10)
        alone = net(rows)
        assert [[p.index for p in t] for t in top_k(answer.logits, CLASSES)] == \
               [[p.index for p in t] for t in top_k(alone, CLASSES)]
        torch.testing.assert_close(torch.softmax(answer.logits, 1), torch.softmax(alone, 1), atol=1e-5, rtol=1e-4)
    assert worker.stats().batches == {1: 1, 7: 1}


def test_a_bad_input_fails_only_its_own_visitor(net: nn.Module) -> None:
    def picky(batch: torch.Tensor) -> torch.Tensor:  # a model that cannot take one visitor's rows
        if torch.isnan(batch).any():
            raise RuntimeError("NaN in the input\nlong native trace")
        with torch.inference_mode():
            return net(batch)
    forward, release, _sizes = held_forward(picky)
    worker = InferenceWorker(forward, BatchLimits(max_batch=8))
    threading.Thread(target=worker.infer, args=(torch.zeros(1, 3, 32, 32),)).start()
    assert forward.entered.wait(60)
    good, bad = torch.randn(2, 3, 32, 32), torch.full((1, 3, 32, 32), float("nan"))
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.extend(
        in_threads([lambda: worker.infer(good), lambda: worker.infer(bad), lambda: worker.infer(good[:1])])))
    runner.start()
    wait_queued(worker, 4)
    release.set()
    runner.join(60)
    ok, failed, ok_too = results
    assert isinstance(ok, Answer) and ok.logits.shape == (2, 10)
    assert isinstance(ok_too, Answer) and ok_too.logits.shape == (1, 10)
    assert isinstance(failed, WorkerError) and str(failed) == "the model could not classify this image: " \
                                                              "NaN in the input"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death is on purpose
def test_a_dead_worker_answers_its_waiters_and_is_restarted(net: nn.Module) -> None:
    calls = []

    def dies_once(batch: torch.Tensor) -> torch.Tensor:
        calls.append(len(batch))
        if len(calls) == 1:
            entered.set()
            assert release.wait(60)
            raise SystemExit  # not an Exception: the worker thread itself ends
        with torch.inference_mode():
            return net(batch)
    release, entered = threading.Event(), threading.Event()
    worker = InferenceWorker(dies_once, BatchLimits(max_batch=1), name="test")
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.extend(
        in_threads([lambda i=i: worker.infer(torch.randn(1, 3, 32, 32)) for i in range(3)])))
    runner.start()
    assert entered.wait(60)
    wait_queued(worker, 2)  # one in the forward, two behind it
    release.set()
    runner.join(60)
    assert not runner.is_alive()  # nobody hangs
    assert all(isinstance(r, WorkerError) and "worker stopped" in str(r) for r in results), results
    assert worker.infer(torch.randn(2, 3, 32, 32)).logits.shape == (2, 10)  # a new thread answers
    assert worker.stats().restarts == 1


def test_tasks_run_between_batches_and_raise_in_the_caller(net: nn.Module) -> None:
    worker = InferenceWorker(lambda b: net(b).detach(), BatchLimits())
    assert worker.call(lambda: threading.current_thread().name) == "dlguide-inference"
    with pytest.raises(ValueError, match="no Grad-CAM layer"):
        worker.call(lambda: (_ for _ in ()).throw(ValueError("no Grad-CAM layer")))
    with pytest.raises(WorkerError, match="expected a"):
        worker.infer(torch.zeros(3, 32, 32))


@pytest.mark.parametrize(("raw", "gpu", "cpu"), [(None, 16, 8), ("4", 4, 4), ("32", 32, 32), ("0", 16, 8),
                                                 ("-2", 16, 8), ("lots", 16, 8)])
def test_the_largest_batch_defaults_by_where_the_model_runs(monkeypatch: pytest.MonkeyPatch, raw: str | None,
                                                            gpu: int, cpu: int) -> None:
    """DLGUIDE_MAX_BATCH when it is a positive whole number; else 16 on a GPU, 8 on a CPU (issue 30: on the CPU a
    batch of 16 cost the booth 400-600 MB more than one of 8, for no more throughput)."""
    from dlguide_core.booth import Predictor

    if raw is None:
        monkeypatch.delenv("DLGUIDE_MAX_BATCH", raising=False)
    else:
        monkeypatch.setenv("DLGUIDE_MAX_BATCH", raw)
    assert BatchLimits.from_env(on_gpu=True).max_batch == gpu
    assert BatchLimits.from_env(on_gpu=False).max_batch == cpu
    forward = lambda batch: batch.mean(dim=(2, 3))  # noqa: E731
    assert Predictor("p", "CPU", forward).worker.limits.max_batch == cpu
    assert Predictor("p", "GPU", forward, on_gpu=True).worker.limits.max_batch == gpu
