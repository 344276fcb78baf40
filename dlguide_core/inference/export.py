"""ONNX export of a LoadedModel, cached under DLGUIDE_HOME/exports by the weights' fingerprint.

The exported file has a dynamic batch dimension and carries, in its metadata_props,
everything a backend needs to label and feed it: class names, the preprocessing preset
(EvalPreset.to_dict), architecture and fingerprint. Input and output names are whatever
the exporter derived from the model (torch.onnx's dynamo exporter names the input after
`forward`'s argument, e.g. "x"); consumers read them from the file, never assume them
(the guide's hard-coded 'x.1' broke when the exporter changed).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import EvalPreset

EXPORTERS = ("dynamo", "torchscript")
META_PREFIX = "dlguide."
MAX_BATCH = 4096  # upper bound of the dynamic batch dimension declared to torch.export


class ExportError(DlguideError):
    """torch.onnx could not export the model, or the result failed onnx.checker."""


@dataclass(frozen=True)
class OnnxExport:
    """An exported model file and what a backend needs to run and label it."""

    path: str
    input_name: str
    output_name: str
    input_shape: tuple[int | str, ...]  # e.g. ("batch", 3, 299, 299)
    fingerprint: str
    arch: str
    class_names: tuple[str, ...] = field(repr=False)
    preset: EvalPreset
    opset: int
    exporter: str = "dynamo"
    export_s: float = 0.0  # 0.0 when it came from the cache
    cached: bool = True

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["class_names"] = len(self.class_names)  # the count; the names live in the file
        data["input_shape"] = list(self.input_shape)
        data["preset"] = self.preset.to_dict()
        return data


def export_cache_path(loaded: LoadedModel) -> Path:
    """Where the ONNX file of these exact weights is cached."""
    return settings.home() / "exports" / f"{loaded.arch}-{loaded.fingerprint}.onnx"


def export_onnx(loaded: LoadedModel, out: str | Path | None = None, *, exporter: str = "dynamo",
                opset: int | None = None, force: bool = False) -> OnnxExport:
    """Export `loaded` (or reuse the cached file for its fingerprint); copy it to `out` when given."""
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {', '.join(EXPORTERS)}, not {exporter!r}")
    cache = export_cache_path(loaded)
    cached = cache.is_file() and not force and cache_matches(cache, loaded.fingerprint)
    seconds = 0.0
    if not cached:
        start = time.perf_counter()
        proto = _export_proto(loaded, exporter, opset)
        write_checked(proto, cache, _metadata(loaded, exporter))
        seconds = time.perf_counter() - start
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.resolve() != cache.resolve():
            shutil.copyfile(cache, out)
    result = read_export(out if out is not None else cache)
    return replace(result, export_s=round(seconds, 3), cached=cached)


def cache_matches(path: Path, fingerprint: str) -> bool:
    """Whether `path` is a readable dlguide ONNX file of the weights with this fingerprint."""
    try:
        return read_metadata(path).get("fingerprint") == fingerprint
    except Exception:  # a truncated or foreign file is simply re-exported
        return False


def _example_batch(loaded: LoadedModel) -> torch.Tensor:
    # Batch 2, not 1: torch.export specialises size-1 dimensions, which would pin the batch.
    crop = loaded.preset.crop
    return torch.randn(2, 3, crop, crop, device=loaded.device)  # (2, 3, crop, crop)


def forward_input_name(model: torch.nn.Module) -> str:
    """The name of the model's first forward argument (what the dynamo exporter calls the input)."""
    params = list(inspect.signature(model.forward).parameters)
    return params[0] if params else "input"


def _export_proto(loaded: LoadedModel, exporter: str, opset: int | None):
    was_training = loaded.model.training
    loaded.model.eval()  # exporting in train mode would bake batch statistics into the graph
    try:
        with torch.no_grad():
            if exporter == "dynamo":
                return _export_dynamo(loaded, opset)
            return _export_torchscript(loaded, opset)
    except DlguideError:
        raise
    except Exception as exc:  # torch.onnx raises many unrelated types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ExportError(f"ONNX export ({exporter}) failed: {first[:300]}") from exc
    finally:
        loaded.model.train(was_training)


def _export_dynamo(loaded: LoadedModel, opset: int | None):
    try:
        import onnxscript  # noqa: F401  (the dynamo exporter needs it; say so instead of a deep ImportError)
    except ImportError:
        raise ExportError("the dynamo ONNX exporter needs onnxscript: pip install onnxscript "
                          "(or use exporter='torchscript')") from None
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    program = torch.onnx.export(loaded.model, (_example_batch(loaded),), dynamo=True, verbose=False,
                                dynamic_shapes=({0: batch},), external_data=False, opset_version=opset)
    return program.model_proto


def _export_torchscript(loaded: LoadedModel, opset: int | None):
    import io

    import onnx

    name = forward_input_name(loaded.model)
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the user chose the legacy exporter; its DeprecationWarning is noise
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(loaded.model, (_example_batch(loaded),), buffer, dynamo=False, input_names=[name],
                          output_names=["logits"], dynamic_axes={name: {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=opset or 17)
    return onnx.load_from_string(buffer.getvalue())


def _metadata(loaded: LoadedModel, exporter: str) -> dict[str, str]:
    return {
        f"{META_PREFIX}class_names": json.dumps(list(loaded.class_names)),
        f"{META_PREFIX}preset": json.dumps(loaded.preset.to_dict()),
        f"{META_PREFIX}fingerprint": loaded.fingerprint,
        f"{META_PREFIX}arch": loaded.arch,
        f"{META_PREFIX}label": loaded.label,
        f"{META_PREFIX}exporter": exporter,
    }


def write_checked(proto, path: Path, metadata: dict[str, str]) -> None:
    """Add metadata, save atomically, and run onnx.checker on the file."""
    import onnx

    onnx.helper.set_model_props(proto, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        onnx.save(proto, tmp_name)
        try:
            onnx.checker.check_model(tmp_name, full_check=True)
        except onnx.checker.ValidationError as exc:
            raise ExportError(f"exported model failed onnx.checker: {str(exc).splitlines()[0][:300]}") from None
        os.replace(tmp_name, path)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The dlguide metadata_props of an ONNX file, decoded (class_names a list, preset a dict)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return _decode_metadata({p.key: p.value for p in model.metadata_props})


def _decode_metadata(props: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key.startswith(META_PREFIX):
            name = key[len(META_PREFIX):]
            out[name] = json.loads(value) if name in ("class_names", "preset") else value
    return out


def read_export(path: str | Path) -> OnnxExport:
    """Describe an exported file from its graph and metadata (names and shapes read, not assumed)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    meta = _decode_metadata({p.key: p.value for p in model.metadata_props})
    if "fingerprint" not in meta:
        raise ExportError(f"{Path(path).name}: not a dlguide export (no dlguide metadata)")
    initializers = {init.name for init in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    dims = tuple(d.dim_param or d.dim_value for d in inputs[0].type.tensor_type.shape.dim)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return OnnxExport(str(path), inputs[0].name, model.graph.output[0].name, dims, meta["fingerprint"],
                      meta.get("arch", "?"), tuple(meta.get("class_names", ())),
                      EvalPreset.from_dict(meta.get("preset", {})), int(opset), meta.get("exporter", "?"),
                      0.0, True)
