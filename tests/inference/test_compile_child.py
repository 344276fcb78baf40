"""torch.compile runs in a child process, never beside live inference (issue 18: tracing patches
torch.nn.Module.__call__/__getattr__ and swaps the RNG state for the whole process while it runs)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch

from dlguide_core.inference.backend_base import BackendError, BackendOptions, sample_batch
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.models import load_model


@pytest.mark.slow
def test_torch_compile_runs_in_a_child_while_another_thread_classifies(cifar, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("torch.compile or an fx trace ran in the serving process")

    monkeypatch.setattr(torch, "compile", refuse)  # the child has its own torch
    monkeypatch.setattr(torch.fx._symbolic_trace.Tracer, "trace", refuse)
    module_call = torch.nn.Module.__call__
    other = load_model(cifar.source, device="cpu")  # a second visitor's model, same weights
    visitor_batch = torch.randn(4, 3, 32, 32)
    reference = predict_logits(other, visitor_batch)
    problems: list[str] = []
    runs = [0]
    done = threading.Event()

    def visitor() -> None:
        while not done.is_set():
            if torch.nn.Module.__call__ is not module_call:
                problems.append("torch.nn.Module.__call__ was patched")
            try:
                if not torch.equal(predict_logits(other, visitor_batch), reference):
                    problems.append("different logits")
            except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
                problems.append(repr(exc))
                return
            runs[0] += 1
            time.sleep(0.002)  # a visitor, not a busy loop: leave the CPU to the compile

    thread = threading.Thread(target=visitor)
    thread.start()
    try:
        # backend="eager": dynamo's capture without inductor's C++ build (seconds, not minutes)
        backend = prepare_backend("torch", cifar, options=BackendOptions(torch_compile="eager"))
        batch = sample_batch(cifar, 3)
        logits = backend.run(batch)
    finally:
        done.set()
        thread.join(timeout=60)
    assert not problems, problems[:3]
    assert runs[0] > 0
    assert torch.allclose(logits, predict_logits(cifar, batch), atol=1e-5)
    assert "torch.compile eager" in backend.provider
    child = backend._compiled
    assert child.pid != os.getpid()

    os.kill(child.pid, signal.SIGKILL)  # a child that dies gives one line, not a traceback or a hang
    with pytest.raises(BackendError, match="torch.compile process ended while running"):
        backend.run(batch)
    child.close()


def test_a_compile_child_that_cannot_start_gives_one_line(cifar, monkeypatch):
    monkeypatch.setattr("dlguide_core.inference.compile_child.sys.executable", "/bin/false")
    with pytest.raises(BackendError, match=r"torch.compile process ended while compiling \(exit 1\)"):
        prepare_backend("torch", cifar, options=BackendOptions(torch_compile="eager"))
