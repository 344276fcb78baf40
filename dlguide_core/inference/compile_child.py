"""torch.compile in a process of its own, which then runs the compiled model: `CompiledProcess` in the parent,
`python -m dlguide_core.inference.compile_child IN_FD OUT_FD` in the child.

Why a process of its own (issue 18): compiling traces the model, and the tracing changes state the whole
process shares while it runs. AOTAutograd's make_fx goes through torch.fx's Tracer, which patches
`torch.nn.Module.__call__` and `__getattr__` process-wide (the very patch that broke every other visitor's
inference during an ONNX export); dynamo saves and later restores the global RNG state and swaps fx's
code generator. Today's tracer happens to pass other threads' calls through, but nothing promises it,
and an inductor compile also holds the GIL for minutes against every visitor of a served app. So an
export or a trace never shares a process with live inference: the child rebuilds the model from its
state dict, compiles it, runs the first (compiling) batch, and then answers batches until its input
closes. A compiled module cannot be handed back across processes, hence the child keeps serving.

Protocol, over two pipes (`multiprocessing.connection.Connection` framing; no pickles either way):
the parent sends the job (`torch.save` of a dict, loaded with weights_only=True), the child answers
one header, {"status": "ready", "provider": ...} or {"status": "error", "message": line}; then each
request is a header {"shape": [...]} and the raw float32 batch, each answer a header {"status": "ok",
"shape": [...]} and the raw float32 logits, or {"status": "error", "message": line}.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import weakref
from multiprocessing.connection import Connection
from typing import IO, Any

import numpy as np
import torch

from dlguide_core.errors import error_summary
from dlguide_core.inference.backend_base import BackendError
from dlguide_core.vision.models import LoadedModel

COMPILE_TIMEOUT_S = 3600  # an inductor compile on a busy CPU takes minutes; not ready by then is stuck
STOP_WAIT_S = 5


class CompileError(BackendError):
    """The compile process failed or ended (one line, safe to show)."""


class CompiledProcess:
    """A child process holding `torch.compile(model, backend=...)`: `run(batch)` sends a batch, returns logits.

    Safe to share between threads (one request at a time). The child ends when this object is collected,
    `close()`d, or this process exits (its input pipe closes)."""

    def __init__(self, loaded: LoadedModel, backend: str, example: torch.Tensor,
                 imports: tuple[str, ...] = ()) -> None:
        from dlguide_core.inference.export import _child_env

        self._lock = threading.Lock()
        self._log = tempfile.TemporaryFile()  # the child's output (inductor's, torch's warnings): for errors
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "dlguide_core.inference.compile_child", str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, env=_child_env())
        except OSError as exc:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            raise CompileError(f"cannot start the torch.compile process: {exc.strerror or exc}") from None
        os.close(to_child_r)  # the child's ends: its exit is then seen here as EOF
        os.close(from_child_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(from_child_r, writable=False)
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._send, self._recv, self._log)
        try:
            try:
                self._send.send_bytes(_job_bytes(loaded, backend, example, imports))
            except OSError:
                raise CompileError(self._ended("compiling")) from None
            header = self._answer(COMPILE_TIMEOUT_S, "compiling")
        except BaseException:
            self.close()
            raise
        self.provider = str(header.get("provider", ""))

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        """(B, 3, crop, crop) float32 -> (B, C) float32 logits on the CPU, computed by the child."""
        array = np.ascontiguousarray(batch.detach().cpu().float().numpy())
        with self._lock:
            try:
                self._send.send_bytes(json.dumps({"shape": list(array.shape)}).encode())
                self._send.send_bytes(array.data.cast("B"))
            except OSError:
                raise CompileError(self._ended("running")) from None
            header = self._answer(None, "running")
            data = self._recv_or_fail("running")
        return torch.from_numpy(np.frombuffer(data, dtype=np.float32).reshape(header["shape"]).copy())

    def close(self) -> None:
        self._finalizer()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _answer(self, timeout: float | None, doing: str) -> dict[str, Any]:
        if timeout is not None and not self._recv.poll(timeout):
            raise CompileError(f"torch.compile took over {timeout} s and was stopped")
        header = json.loads(self._recv_or_fail(doing))
        if header.get("status") == "error":
            raise CompileError(str(header.get("message", "torch.compile failed")))
        return header

    def _recv_or_fail(self, doing: str) -> bytes:
        try:
            return self._recv.recv_bytes()
        except (EOFError, OSError):
            raise CompileError(self._ended(doing)) from None

    def _ended(self, doing: str) -> str:
        code = self._proc.wait(timeout=STOP_WAIT_S)
        self._log.seek(0)
        lines = [line.strip() for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
        last = lines[-1][:300] if lines else "no output"
        return f"the torch.compile process ended while {doing} (exit {code}): {last}"


def _stop(proc: subprocess.Popen, send: Connection, recv: Connection, log: IO[bytes]) -> None:
    for end in (send, recv):
        end.close()  # the child reads EOF and exits
    try:
        proc.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def _job_bytes(loaded: LoadedModel, backend: str, example: torch.Tensor, imports: tuple[str, ...] = ()) -> bytes:
    state = {k: v.detach().cpu().contiguous() for k, v in loaded.model.state_dict().items()}
    job = {"arch": loaded.arch, "arch_kwargs": dict(loaded.arch_kwargs), "model": state, "backend": backend,
           "device": str(loaded.device), "example": example.detach().cpu().float().contiguous(),
           "imports": list(imports)}
    buffer = io.BytesIO()
    torch.save(job, buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------- the child


def serve(recv: Connection, send: Connection) -> None:
    """Compile the job's model, answer ready (or one error line), then answer batches until EOF."""
    from dlguide_core.inference.export_child import rebuild_model

    def reply(header: dict[str, Any], data: np.ndarray | None = None) -> None:
        send.send_bytes(json.dumps(header).encode())
        if data is not None:
            send.send_bytes(np.ascontiguousarray(data, dtype=np.float32).data.cast("B"))

    try:
        job = torch.load(io.BytesIO(recv.recv_bytes()), map_location="cpu", weights_only=True)
        device = torch.device(job["device"])
        for name in job.get("imports", []):  # a compile backend registers itself on import (zentorch)
            importlib.import_module(name)
        module = torch.compile(rebuild_model(job).to(device), backend=job["backend"])
        with torch.inference_mode():
            module(job["example"].to(device))  # compilation happens on the first call
    except EOFError:
        return
    except Exception as exc:  # noqa: BLE001 - dynamo and inductor raise many unrelated types
        reply({"status": "error", "message": f"torch.compile failed: {error_summary(exc)}"})
        return
    reply({"status": "ready", "provider": f"{device} (torch.compile {job['backend']}, own process)"})
    while True:
        try:
            header = json.loads(recv.recv_bytes())
            batch = torch.from_numpy(np.frombuffer(recv.recv_bytes(), dtype=np.float32).reshape(header["shape"]))
        except EOFError:
            return
        try:
            with torch.inference_mode():
                logits = module(batch.to(device)).float().cpu().numpy()
        except Exception as exc:  # noqa: BLE001 - one line back to the parent, the process keeps serving
            reply({"status": "error", "message": f"torch.compile run failed: {error_summary(exc)}"})
            continue
        reply({"status": "ok", "shape": list(logits.shape)}, logits)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not all(a.isdigit() for a in args):
        print("usage: python -m dlguide_core.inference.compile_child IN_FD OUT_FD", file=sys.stderr)
        return 2
    recv, send = Connection(int(args[0]), writable=False), Connection(int(args[1]), readable=False)
    try:
        serve(recv, send)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away
    return 0


if __name__ == "__main__":
    sys.exit(main())
