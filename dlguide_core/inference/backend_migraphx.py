"""AMD MIGraphX as a backend: the guide's chapter (parse_onnx, quantise, compile, run, save/load .mxr).

Targets: `gpu` on a ROCm host; on a host without an AMD GPU the `cpu` target (oneDNN) is a
backend of its own, labelled "MIGraphX (CPU)" everywhere. `ref` (the reference interpreter)
is a correctness oracle for tests, never offered here. Precisions are whatever the target
runs (`migraphx_lib.target_support` probes it); a refusal is an availability reason.

Compiled programs are cached as DLGUIDE_HOME/compiled/<arch>-<fingerprint>-b<B>-<precision>-
<target>[-tuned].mxr (`mxr_files`): on the gpu target a second start loads that file instead of compiling. The
cpu target compiles in every process and never runs a loaded program (`RUNS_LOADED_PROGRAMS`, issue 26).
A .mxr compiled outside dlguide (`migraphx-driver compile --onnx <export> --binary --output m.mxr`) is
accepted through `BackendOptions(mxr=...)` (`bench --mxr`): it must take the export's input
at (B, 3, crop, crop) and give this model's answers on the bundled photos; it is then copied
under the cache name, so later starts find it without the option.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dlguide_core import migraphx_lib
from dlguide_core.errors import error_summary
from dlguide_core.inference import backend_base, specs
from dlguide_core.inference.backend_base import (
    Availability,
    Backend,
    BackendError,
    BackendInfo,
    BackendOptions,
    Outputs,
    Progress,
    sample_batch,
)
from dlguide_core.inference.export import OnnxExport
from dlguide_core.inference.mxr_files import compiled_path, read_compile_s, save_atomically
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.samples import bundled_samples

# Whether a program loaded from .mxr runs as fast as a compiled one. Not on this build's cpu target: loaded
# in a process that has not compiled the model, oneDNN picks its reference convolution (`ref:any` in
# ONEDNN_VERBOSE=2) for 21 of Inception v3's 85 convolutions instead of `x64:gemm:jit`: ~100x slower. In
# the compiling process oneDNN's primitive cache still holds the jit kernels, so a load there is as fast:
# why bench_backends.py (compile, save, load, time) and `bench`/the app (a later start: load) disagreed.
RUNS_LOADED_PROGRAMS = {"gpu": True, "cpu": False}
# A fresh or external program must give the model's top-1 on every sample photo and logits within this
# fraction of the largest eager logit (bf16, the loosest precision, measured 1.1-1.2e-1 on Inception v3).
ADOPT_REL_TOLERANCE = 0.2


def resolve_target(target: str) -> str:
    """auto: the gpu target when an AMD GPU is visible, else the cpu target."""
    if target == "auto":
        return "gpu" if backend_base.amd_gpu_visible() else "cpu"
    return target


class MigraphxBackend(Backend):
    """Parse the ONNX export for a fixed batch, optionally quantise, compile for a target, cache as .mxr."""

    name, title = specs.MIGRAPHX, specs.label(specs.MIGRAPHX)
    compile_s = load_s = None  # type: float | None

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        options = options or BackendOptions()
        target = resolve_target(options.target)

        def state(ok: bool, reason: str) -> Availability:
            return Availability(cls.name, specs.label(cls.name, target), ok, reason)

        ok, found = migraphx_lib.status()
        if not ok:
            return state(False, found)
        if target == "gpu" and not backend_base.amd_gpu_visible():
            return state(False, "no AMD GPU visible (/dev/kfd missing); MIGraphX (CPU) runs here: use target cpu")
        support = migraphx_lib.target_support(target)
        if support.error:
            return state(False, support.error)
        if options.precision not in support.precisions:
            return state(False, support.refused.get(options.precision,
                                                    f"MIGraphX's {target} target does not run {options.precision}"))
        if options.exhaustive_tune and not support.exhaustive_tune:
            return state(False, support.refused["exhaustive_tune"])
        if options.mxr and not Path(options.mxr).is_file():
            return state(False, f"no such .mxr file: {options.mxr}")
        where = "the AMD GPU" if target == "gpu" else "the CPU (oneDNN; no AMD GPU here)"
        return state(True, f"{found}; {target} target on {where}, runs {', '.join(support.precisions)}")

    @property
    def target(self) -> str:
        return resolve_target(self.options.target)

    @property
    def label(self) -> str:
        return specs.label(self.name, self.target)

    @property
    def on_gpu(self) -> bool:
        return self.target == "gpu"

    def precompile(self, loaded: LoadedModel, *, batch_size: int = 1, progress: Progress | None = None) -> None:
        self.prepare(loaded, batch_size=batch_size, progress=progress)  # compiles and saves the .mxr

    @property
    def provider(self) -> str:
        return f"migraphx:{self.target}" + ("" if self.options.precision == "fp32" else f" {self.options.precision}")

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one MIGraphX call on this backend's own thread: a program compiled or loaded on one thread
        crashes (SIGSEGV in oneDNN) when run from another on the cpu target (seen with 2.16 here), and
        Streamlit runs every script rerun on a new thread. The one worker also serialises runs."""
        return self._worker.submit(fn, *args, **kwargs).result()

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        migraphx, _found = migraphx_lib.load()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        export = self._export(loaded, progress)
        path = compiled_path(loaded, self.batch_size, self.options, self.target)
        loads = RUNS_LOADED_PROGRAMS.get(self.target, True)
        self.from_cache, self.compile_s, self.load_s = path.is_file() and not self.options.mxr and loads, None, None
        try:
            if self.options.mxr:
                self._program = self._adopt(migraphx, Path(self.options.mxr), export, loaded, progress)
                if not loads:  # checked, filed under the cache name; what runs is compiled here
                    self._compile_checked(migraphx, export, loaded, progress)
            elif self.from_cache:
                progress(f"Loading the compiled program {path.name}…", 0.5)
                self._program = self._timed_load(migraphx, path)
                self.saved_compile_s = read_compile_s(path)
            else:
                self._compile_checked(migraphx, export, loaded, progress)
                if loads or not path.is_file():  # the cpu target's file is for migraphx-driver users
                    progress("Saving the compiled program (.mxr)…", 0.9)
                    self._call(save_atomically, migraphx, self._program, path, self.compile_s)
        except BackendError:
            raise
        except Exception as exc:  # migraphx raises RuntimeError with long C++ messages
            raise BackendError(f"MIGraphX failed: {error_summary(exc)}") from exc
        self._input = export.input_name
        self._compiled_batch = self._check_parameters(export, loaded.preset.crop)
        self.mxr_path: str = str(self.mxr_path if self.options.mxr else path)
        progress("Ready", 1.0)

    def _compile_checked(self, migraphx: Any, export: OnnxExport, loaded: LoadedModel, progress: Progress) -> None:
        start = time.perf_counter()
        self._program = self._compile(migraphx, export, loaded, progress)
        self.compile_s = time.perf_counter() - start
        self._refuse_wrong_answers(export, loaded, progress)

    def _refuse_wrong_answers(self, export: OnnxExport, loaded: LoadedModel, progress: Progress) -> None:
        """A fresh program must answer like PyTorch before it is cached: MIGraphX 2.16's cpu target compiles
        and runs fp16 and int8 Inception v3 but returns all-zero logits (seen here), a silent wrong answer."""
        progress("Checking the compiled program against PyTorch on the sample photos…", 0.85)
        self._input, self._compiled_batch = export.input_name, self._check_parameters(export, loaded.preset.crop)
        problem = self._disagreement(loaded)
        if problem:
            raise BackendError(f"MIGraphX {self.options.precision} on its {self.target} target gives wrong answers for "
                               f"this model ({problem}); use fp32 or another precision")

    def _timed_load(self, migraphx: Any, path: Path) -> Any:
        start = time.perf_counter()
        program = self._call(migraphx.load, str(path))
        self.load_s = time.perf_counter() - start
        return program

    def _compile(self, migraphx: Any, export: OnnxExport, loaded: LoadedModel, progress: Progress) -> Any:
        crop = loaded.preset.crop
        progress("Parsing the ONNX file…", 0.2)
        # The exported batch dimension is symbolic; MIGraphX compiles for one fixed batch size.
        program = self._call(migraphx.parse_onnx, export.path,
                             map_input_dims={export.input_name: [self.batch_size, 3, crop, crop]})
        target = self._call(migraphx.get_target, self.target)
        if self.options.precision != "fp32":
            progress(f"Quantising to {self.options.precision}"
                     + (" (calibrating on the sample photos)…" if self.options.precision == "int8" else "…"), 0.3)
            calibration = [{export.input_name: chunk} for chunk in calibration_batches(loaded, self.batch_size)]
            self._call(migraphx_lib.quantize, migraphx, program, target, self.options.precision, calibration)
        progress(f"Compiling for {self.target}" + (" with exhaustive tuning" if self.options.exhaustive_tune else "")
                 + "…", 0.4)
        if self.options.exhaustive_tune:
            self._call(program.compile, target, offload_copy=True, exhaustive_tune=True)
        else:
            self._call(program.compile, target, offload_copy=True)  # host arrays in and out
        return program

    def _adopt(self, migraphx: Any, source: Path, export: OnnxExport, loaded: LoadedModel, progress: Progress) -> Any:
        """Load a .mxr compiled elsewhere, check it is this model, and file it under the cache name."""
        progress(f"Loading {source.name} (compiled outside dlguide)…", 0.4)
        self._program = self._timed_load(migraphx, source)
        batch_size = self._check_parameters(export, loaded.preset.crop)
        self._input, self._compiled_batch = export.input_name, batch_size
        progress("Checking it against PyTorch on the sample photos…", 0.7)
        problem = self._disagreement(loaded)
        if problem:
            raise BackendError(f"{source.name} does not match these weights ({loaded.label}): {problem}; "
                               f"compile it from {export.path}")
        self.batch_size = batch_size
        dest = compiled_path(loaded, batch_size, self.options, self.target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.resolve() != dest.resolve():
            shutil.copyfile(source, dest.with_name(dest.name + ".tmp"))
            os.replace(dest.with_name(dest.name + ".tmp"), dest)
        self.mxr_path, self.adopted_from = str(dest), str(source)
        return self._program

    def _disagreement(self, loaded: LoadedModel) -> str | None:
        """None when this program gives the model's top-1 on every sample photo with logits within
        ADOPT_REL_TOLERANCE of eager PyTorch's; else what is wrong, in words."""
        batch = sample_batch(loaded, max(self._compiled_batch, len(bundled_samples())))  # (B, 3, crop, crop)
        with torch.inference_mode():
            reference = loaded.model(batch.to(loaded.device)).float().cpu()
        logits = self.run(batch)
        if not bool(torch.isfinite(logits).all()):
            return "its logits are not finite"
        rel = float((reference - logits).abs().max()) / max(float(reference.abs().max()), 1e-12)
        if float(logits.abs().max()) == 0.0:
            return "every logit is 0"
        if rel > ADOPT_REL_TOLERANCE or not bool((reference.argmax(1) == logits.argmax(1)).all()):
            return f"top-1 differs or logits differ by {rel:.2g} of the largest"
        return None

    def _check_parameters(self, export: OnnxExport, crop: int) -> int:
        names = list(self._program.get_parameter_names())
        if export.input_name not in names:
            raise BackendError(f"compiled program has no input {export.input_name!r} (has {', '.join(names)})")
        lens = [int(n) for n in self._program.get_parameter_shapes()[export.input_name].lens()]
        if len(lens) != 4 or lens[1:] != [3, crop, crop]:
            raise BackendError(f"compiled program takes {export.input_name} as {lens}, not [B, 3, {crop}, {crop}]")
        return lens[0]

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        """Split or pad to the compiled batch size, since a compiled program's shapes are fixed."""
        return self._run_all(batch)[0]

    def run_features(self, batch: torch.Tensor) -> Outputs:
        """Logits and features from one run of the program (the export's two outputs, in the graph's order); a
        program with the logits only (a .mxr compiled from an older export) falls back to the eager features."""
        outputs = self._run_all(batch)
        return Outputs(outputs[0], outputs[1].flatten(1)) if len(outputs) > 1 else super().run_features(batch)

    def _run_all(self, batch: torch.Tensor) -> list[torch.Tensor]:
        """Every output of the program for `batch`, run in chunks of the compiled batch size (the last padded)."""
        array = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        size = self._compiled_batch
        parts = []
        for start in range(0, len(array), size):
            chunk = array[start:start + size]
            real = len(chunk)
            if real < size:
                pad = np.zeros((size - real, *chunk.shape[1:]), dtype=np.float32)
                chunk = np.ascontiguousarray(np.concatenate([chunk, pad]))
            parts.append([out[:real] for out in self._call(self._run_chunk, chunk)])
        return [torch.from_numpy(np.concatenate(column)) for column in zip(*parts, strict=True)]

    def _run_chunk(self, chunk: np.ndarray) -> list[np.ndarray]:  # on the worker thread
        return [np.array(out, dtype=np.float32) for out in self._program.run({self._input: chunk})]

    def describe(self) -> MigraphxInfo:
        return MigraphxInfo(
            **vars(super().describe()), target=self.target, exhaustive_tune=self.options.exhaustive_tune,
            mxr=getattr(self, "mxr_path", None), from_cache=getattr(self, "from_cache", None),
            adopted_from=getattr(self, "adopted_from", None), compile_s=_rounded(getattr(self, "compile_s", None)),
            saved_compile_s=getattr(self, "saved_compile_s", None), load_s=_rounded(getattr(self, "load_s", None)),
            miopen_find_enforce=os.environ.get("MIOPEN_FIND_ENFORCE"))


@dataclass(frozen=True)
class MigraphxInfo(BackendInfo):
    """A prepared MIGraphX program: `BackendInfo` and how it came to be (compiled, loaded, adopted)."""

    target: str
    exhaustive_tune: bool
    mxr: str | None  # the compiled program's file
    from_cache: bool | None  # loaded from that file rather than compiled now
    adopted_from: str | None  # a .mxr compiled outside dlguide (bench --mxr) it was copied from
    compile_s: float | None
    saved_compile_s: float | None  # what the cached .mxr took to compile
    load_s: float | None
    miopen_find_enforce: str | None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def calibration_batches(loaded: LoadedModel, batch_size: int) -> list[np.ndarray]:
    """Every bundled photo at least once, in (batch_size, 3, crop, crop) float32 chunks (int8 calibration)."""
    count = len(bundled_samples())
    total = -(-count // batch_size) * batch_size  # whole chunks, the photos repeated to fill the last one
    batch = sample_batch(loaded, total).numpy()
    return [np.ascontiguousarray(batch[i:i + batch_size]) for i in range(0, total, batch_size)]
