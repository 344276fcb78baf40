"""ONNX export of a LoadedModel, cached under DLGUIDE_HOME/exports by the weights' fingerprint.

The exported file has a dynamic batch dimension and carries, in its metadata_props,
everything a backend needs to label and feed it: class names, the preprocessing preset
(EvalPreset.to_dict), architecture and fingerprint. Input and output names are whatever
the exporter derived from the model (torch.onnx's dynamo exporter names the input after
`forward`'s argument, e.g. "x"); consumers read them from the file, never assume them
(the guide's hard-coded 'x.1' broke when the exporter changed).

The tracing runs in a child process (`export_child`): torch's exporter patches nn.Module.__call__ for the
whole process while it traces, which breaks every other thread's inference in a served app (issue 18).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from dlguide_core import settings
from dlguide_core.errors import DlguideError, UsageError, error_summary
from dlguide_core.inference.export_files import JOB_SUFFIX, owner_tag, remove_stale_temporaries
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import EvalPreset

EXPORTERS = ("dynamo", "torchscript")
META_PREFIX = "dlguide."
FEATURES_META = "features"  # dlguide.features: the name of the graph's second output, the pooled features ("" none)
MAX_BATCH = 4096  # upper bound of the dynamic batch dimension declared to torch.export
EXPORT_TIMEOUT_S = 3600  # a child export that has not finished by then is stuck, not slow


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
    features_name: str | None = None  # the pooled (B, D) features output (issue 44); None: the file has none

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["class_names"] = len(self.class_names)  # the count; the names live in the file
        data["input_shape"] = list(self.input_shape)
        data["preset"] = self.preset.to_dict()
        return data


_MADE_HERE: dict[Path, float] = {}  # exports this process made (path -> seconds): "made now" is then true


def made_here_s(path: str | Path) -> float | None:
    """Seconds this process took to make the export at `path`; None when it found the file in the cache."""
    return _MADE_HERE.get(Path(path))


def export_cached(loaded: LoadedModel, exporter: str = "dynamo", opset: int | None = None) -> bool:
    """Whether `loaded`'s default export is in the cache already (export_onnx would reuse it)."""
    return cache_matches(export_cache_path(loaded, exporter, opset), loaded.fingerprint, exporter=exporter,
                         opset=opset)


def export_cache_path(loaded: LoadedModel, exporter: str = "dynamo", opset: int | None = None) -> Path:
    """Where the ONNX file of these exact weights and export options is cached. Every option that changes
    the file is in the name; the default export keeps its historical name `<arch>-<fingerprint>.onnx`."""
    options = "" if (exporter, opset) == ("dynamo", None) else f".{exporter}" + (f".opset{opset}" if opset else "")
    return settings.home() / "exports" / f"{loaded.arch}-{loaded.fingerprint}{options}.onnx"


class OpsetError(ExportError, UsageError):
    """An opset the chosen exporter cannot write (it would silently write another): a usage error, exit 2."""


def opset_range(exporter: str) -> tuple[int, int]:
    """The opsets `exporter` writes as asked: dynamo 18 up to torch's newest (below 18 it silently wrote 18),
    torchscript from torch's oldest to its own newest."""
    from torch.onnx import _constants

    if exporter == "dynamo":
        return 18, int(_constants.ONNX_MAX_OPSET)
    return int(_constants.ONNX_MIN_OPSET), int(getattr(_constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", 20))


def check_opset(exporter: str, opset: int | None) -> None:
    """OpsetError (one line) unless `opset` is None (the exporter's default) or one it supports."""
    if opset is None:
        return
    low, high = opset_range(exporter)
    if not low <= opset <= high:
        raise OpsetError(f"--opset {opset} is not supported by the {exporter} exporter: use {low} to {high} "
                         "(or leave it out for the exporter's default)")


def export_onnx(loaded: LoadedModel, out: str | Path | None = None, *, exporter: str = "dynamo",
                opset: int | None = None, force: bool = False) -> OnnxExport:
    """Export `loaded` (or reuse the cached file for its weights and options); copy it to `out` when given."""
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {', '.join(EXPORTERS)}, not {exporter!r}")
    check_opset(exporter, opset)
    if out is not None and Path(out).is_dir():
        raise ExportError(f"--out {out} is a directory; name the .onnx file to write")
    cache = export_cache_path(loaded, exporter, opset)
    cached = not force and cache_matches(cache, loaded.fingerprint, exporter=exporter, opset=opset)
    seconds = 0.0
    if not cached:
        start = time.perf_counter()
        _export_in_child(loaded, cache, exporter, opset)
        seconds = time.perf_counter() - start
        _MADE_HERE[cache] = round(seconds, 3)
    if out is not None:
        _copy_out(cache, Path(out))
    result = read_export(out if out is not None else cache)
    return replace(result, export_s=round(seconds, 3), cached=cached)


def _copy_out(cache: Path, out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.resolve() != cache.resolve():
            shutil.copyfile(cache, out)
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from None


def cache_matches(path: Path, fingerprint: str, *, exporter: str | None = None, opset: int | None = None) -> bool:
    """Whether `path` is a readable dlguide ONNX file of the weights with this fingerprint (and, when given,
    made by this exporter at this opset)."""
    try:
        if not path.is_file():
            return False
        meta = read_metadata(path)
        # A file exported before the features output (no FEATURES_META) is exported again, with it
        if FEATURES_META not in meta or meta.get("fingerprint") != fingerprint or (
                exporter and meta.get("exporter") != exporter):
            return False
        return opset is None or read_export(path).opset == opset
    except Exception:  # a truncated or foreign file is simply re-exported
        return False


def forward_input_name(model: torch.nn.Module) -> str:
    """The name of the model's first forward argument (what the dynamo exporter calls the input)."""
    params = list(inspect.signature(model.forward).parameters)
    return params[0] if params else "input"


def _export_in_child(loaded: LoadedModel, cache: Path, exporter: str, opset: int | None) -> None:
    """Trace in `python -m dlguide_core.inference.export_child`, never in this process (see that module)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in loaded.model.state_dict().items()}
    job = {"arch": loaded.arch, "arch_kwargs": dict(loaded.arch_kwargs), "model": state,
           "crop": int(loaded.preset.crop), "exporter": exporter, "opset": opset, "out": str(cache),
           "metadata": _metadata(loaded, exporter)}
    remove_stale_temporaries(cache.parent)
    # The owner's pid in the name: a parent killed before its `finally` leaves a file the next export removes.
    fd, job_name = tempfile.mkstemp(prefix=f"{cache.name}.{owner_tag()}.", suffix=JOB_SUFFIX, dir=cache.parent)
    os.close(fd)
    try:
        torch.save(job, job_name)
        del state, job
        done = subprocess.run([sys.executable, "-m", "dlguide_core.inference.export_child", job_name],
                              env=_child_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ExportError(f"ONNX export ({exporter}) took over {EXPORT_TIMEOUT_S} s and was stopped") from None
    finally:
        Path(job_name).unlink(missing_ok=True)
    if done.returncode != 0:
        raise ExportError(_child_failure(done.returncode, done.stderr, exporter))


def _child_env() -> dict[str, str]:
    # The child imports dlguide_core from where this process did, whatever its working directory.
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else ""),
            "DLGUIDE_EXPORT_PARENT": str(os.getpid())}  # export_child dies with us (its PARENT_ENV)


def _child_failure(returncode: int, stderr: str, exporter: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = next((line[len("error: "):] for line in reversed(lines) if line.startswith("error: ")), None)
    if said:
        return said
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"the ONNX export ({exporter}) process was killed by {name} (out of memory?)"
    last = lines[-1][:300] if lines else "no output"
    return f"the ONNX export ({exporter}) process failed (exit {returncode}): {last}"


def _metadata(loaded: LoadedModel, exporter: str) -> dict[str, str]:
    return {
        f"{META_PREFIX}class_names": json.dumps(list(loaded.class_names)),
        f"{META_PREFIX}preset": json.dumps(loaded.preset.to_dict()),
        f"{META_PREFIX}fingerprint": loaded.fingerprint,
        f"{META_PREFIX}arch": loaded.arch,
        f"{META_PREFIX}label": loaded.label,
        f"{META_PREFIX}exporter": exporter,
    }


def write_checked(proto: Any, path: Path, metadata: dict[str, str]) -> None:
    """Add metadata, save atomically, and run onnx.checker on the file."""
    import onnx

    onnx.helper.set_model_props(proto, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f"{path.name}.{owner_tag()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        onnx.save(proto, tmp_name)
        try:
            onnx.checker.check_model(tmp_name, full_check=True)
        except onnx.checker.ValidationError as exc:
            raise ExportError(f"exported model failed onnx.checker: {error_summary(exc)}") from None
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
    outputs = [o.name for o in model.graph.output]
    features = meta.get(FEATURES_META) or None
    return OnnxExport(str(path), inputs[0].name, outputs[0], dims, meta["fingerprint"],
                      meta.get("arch", "?"), tuple(meta.get("class_names", ())),
                      EvalPreset.from_dict(meta.get("preset", {})), int(opset), meta.get("exporter", "?"),
                      0.0, True, features if features in outputs else None)
