"""The ONNX export itself, run in a child process: `python -m dlguide_core.inference.export_child JOB.pt`.

Why a process of its own: torch.onnx's dynamo exporter patches `torch.nn.Module.__call__` for the whole
process while it traces, so any other thread running a model at that moment goes through the tracer and
fails (`fake_mode.in_kernel_invocation must be False`, `shape_env is required`; issue 18). A 25 s export
also holds the GIL against every visitor of a served app. The parent (`export.export_onnx`) writes a job
file (the state dict, architecture, options and metadata; loaded with weights_only=True here), waits, and
reads the checked ONNX file this process wrote atomically to the cache path.
"""

from __future__ import annotations

import io
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from dlguide_core.errors import DlguideError, error_summary
from dlguide_core.inference.export import (
    FEATURES_META,
    MAX_BATCH,
    META_PREFIX,
    ExportError,
    forward_input_name,
    write_checked,
)
from dlguide_core.vision.models import build_model


def rebuild_model(job: dict) -> torch.nn.Module:
    """The job's architecture with its weights, in eval mode on the CPU."""
    model = build_model(job["arch"], **job["arch_kwargs"])
    model.load_state_dict(job["model"])
    return model.eval()


def trace_to_onnx(model: torch.nn.Module, crop: int, exporter: str, opset: int | None) -> Any:
    """`model` traced to an ONNX ModelProto with a dynamic batch dimension; ExportError in one line."""
    example = torch.randn(2, 3, crop, crop)  # batch 2, not 1: torch.export specialises size-1 dimensions
    try:
        with torch.no_grad():
            if exporter == "dynamo":
                return _export_dynamo(model, example, opset)
            return _export_torchscript(model, example, opset)
    except DlguideError:
        raise
    except Exception as exc:  # torch.onnx raises many unrelated types
        raise ExportError(f"ONNX export ({exporter}) failed: {error_summary(exc)}") from exc


def _export_dynamo(model: torch.nn.Module, example: torch.Tensor, opset: int | None) -> Any:
    try:
        import onnxscript  # noqa: F401  (the dynamo exporter needs it; say so instead of a deep ImportError)
    except ImportError:
        raise ExportError("the dynamo ONNX exporter needs onnxscript: pip install onnxscript "
                          "(or use exporter='torchscript')") from None
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    program = torch.onnx.export(model, (example,), dynamo=True, verbose=False, dynamic_shapes=({0: batch},),
                                external_data=False, opset_version=opset)
    return program.model_proto


def _export_torchscript(model: torch.nn.Module, example: torch.Tensor, opset: int | None) -> Any:
    import onnx

    name = forward_input_name(model)
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the user chose the legacy exporter; its DeprecationWarning is noise
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, (example,), buffer, dynamo=False, input_names=[name], output_names=["logits"],
                          dynamic_axes={name: {0: "batch"}, "logits": {0: "batch"}}, opset_version=opset or 17)
    return onnx.load_from_string(buffer.getvalue())


def run_job(job_path: Path) -> None:
    job = torch.load(job_path, map_location="cpu", weights_only=True)
    job_path.unlink(missing_ok=True)  # ~100 MB of weights: gone as soon as read, whatever happens to the parent
    proto = trace_to_onnx(rebuild_model(job), int(job["crop"]), job["exporter"], job["opset"])
    features = add_features_output(proto)  # the pooled features as a second output (issue 44)
    write_checked(proto, Path(job["out"]), {**dict(job["metadata"]), f"{META_PREFIX}{FEATURES_META}": features})


def add_features_output(proto: Any) -> str:
    """Make the input of the graph's final classifier (the pooled features the head multiplies) a second graph
    output, beside the logits: one run then gives both (issue 44). Returns its name, "" where the graph does not
    end in a Gemm or MatMul(+Add) on a 2-d input (then the file has the logits only and backends fall back)."""
    import onnx

    graph = proto.graph
    producers = {out: node for node in graph.node for out in node.output}
    node = producers.get(graph.output[0].name)
    if node is not None and node.op_type == "Add":  # MatMul + Add (the dynamo exporter's linear without Gemm)
        node = next((producers[i] for i in node.input if i in producers and producers[i].op_type == "MatMul"), None)
    if node is None or node.op_type not in ("Gemm", "MatMul"):
        return ""
    if not any(o.name == node.input[0] for o in graph.output):
        graph.output.append(onnx.helper.make_tensor_value_info(node.input[0], onnx.TensorProto.FLOAT, ["batch", None]))
    return node.input[0]


PARENT_ENV = "DLGUIDE_EXPORT_PARENT"  # the pid of the process that started this one (export._child_env)


def _die_with_parent() -> None:
    """Linux: SIGTERM when the process that asked for the export dies (its result would go unread), and exit now
    if it died already. Elsewhere nothing: the next export removes what is left (export.remove_stale_temporaries)."""
    import ctypes
    import os
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit() and os.getppid() != int(parent):  # it died before the line above
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dlguide_core.inference.export_child JOB.pt", file=sys.stderr)
        return 2
    _die_with_parent()
    try:
        run_job(Path(args[0]))
    except DlguideError as exc:
        print(f"error: {exc}", file=sys.stderr)  # the parent shows this last line
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
