"""Finding AMD MIGraphX's Python module where users have it, and what its targets can run.

MIGraphX is not on PyPI: ROCm's `migraphx` package puts `migraphx.cpython-*.so` in
`/opt/rocm/lib`, and users are told to add that folder to PYTHONPATH. So `load` tries, in
order: a plain `import migraphx`; the folder named by MIGRAPHX_PYTHONPATH; `$ROCM_PATH/lib`
(ROCM_PATH defaults to /opt/rocm). When none works, `MigraphxMissing` says what each place
gave. Nothing here runs at import time; `migraphx` itself is imported only inside functions.

`target_support` compiles a tiny graph for a target at each precision, once per process
(about 0.1 s each on a CPU), so the app offers exactly the precisions the installed library
runs there, and says in one line why it refuses the others.

`python -m dlguide_core.migraphx_lib LIB_FOLDER VENV` (run by `make install` when
../shared/migraphx exists) writes a .pth that makes a build folder importable in a venv.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from dlguide_core.errors import DlguideError, error_summary

PRECISIONS = ("fp32", "fp16", "bf16", "int8")  # what MIGraphX quantises to (quantize_fp16/bf16/int8)
TARGETS = ("gpu", "cpu", "ref")  # ref: MIGraphX's reference interpreter, a correctness oracle only
DEFAULT_ROCM_PATH = "/opt/rocm"


class MigraphxMissing(DlguideError):
    """No place gave a working `migraphx` module; the message lists what each one gave."""


@dataclass(frozen=True)
class Lookup:
    """Where `migraphx` came from (`how`: importable, MIGRAPHX_PYTHONPATH or $ROCM_PATH/lib) and its file."""

    how: str
    path: str
    version: str




def fallback_folders() -> list[tuple[str, Path | None]]:
    """The fallback folders in the order they are tried: (how, folder or None when unset)."""
    named = os.environ.get("MIGRAPHX_PYTHONPATH", "").strip()
    rocm = os.environ.get("ROCM_PATH", "").strip() or DEFAULT_ROCM_PATH
    return [("MIGRAPHX_PYTHONPATH", Path(named) if named else None), ("$ROCM_PATH/lib", Path(rocm) / "lib")]


_FOUND: dict[int, tuple[ModuleType, Lookup]] = {}  # modules loaded from a fallback folder, and how


# MIGraphX and TensorFlow each register protobuf descriptors of the same ONNX/TF protos: loading MIGraphX
# after TensorFlow aborts the whole process (a C++ CHECK in AddDescriptors), the other order works. The
# TensorFlow runtime therefore loads MIGraphX first (tf.runtime.import_tensorflow), and a late
# load refuses instead of taking the process (an app server: every visitor) down.
TENSORFLOW_FIRST = ("MIGraphX cannot load in a process that has already loaded TensorFlow (their protobuf "
                    "registrations clash and the process would abort); restart it, MIGraphX loads first then")


def _tensorflow_loaded() -> bool:
    return "migraphx" not in sys.modules and any(name.startswith("tensorflow.python") for name in sys.modules)


# MIGraphX logs to stderr from its C++ side at INFO (3) by default: performance hints such as "[WARN] ...
# Instruction needs normalization, performance may be affected" on every compile of the guide's model, which
# a user cannot act on (issue 43's walk: console noise). Errors only (1) unless the user sets the variable.
LOG_LEVEL_ENV, QUIET_LOG_LEVEL = "MIGRAPHX_LOG_LEVEL", "1"


def quiet_logs() -> None:
    """MIGraphX's errors only, in this process and the ones it starts, unless MIGRAPHX_LOG_LEVEL is set. Called
    before the library first logs (it reads the variable once): before loading it, or ONNX Runtime's MIGraphX
    provider."""
    os.environ.setdefault(LOG_LEVEL_ENV, QUIET_LOG_LEVEL)


def load() -> tuple[ModuleType, Lookup]:
    """The `migraphx` module and where it came from; MigraphxMissing (one line) when nowhere works."""
    quiet_logs()
    tried, broken = [], False  # broken: a module was found but would not load
    if _tensorflow_loaded() and importlib.util.find_spec("migraphx") is not None:
        raise MigraphxMissing(f"module migraphx found but unusable: {TENSORFLOW_FIRST}")
    try:
        import migraphx

        return migraphx, _FOUND.get(id(migraphx), (None, _lookup(migraphx, "importable")))[1]
    except ImportError as exc:
        blocked = isinstance(exc, ModuleNotFoundError) or sys.modules.get("migraphx", 0) is None
        broken = not blocked
        tried.append("not importable" if blocked else f"import migraphx failed: {error_summary(exc)}")
    except Exception as exc:  # a broken ROCm install raises all sorts
        broken = True
        tried.append(f"import migraphx failed: {error_summary(exc)}")
    for how, folder in fallback_folders():
        if folder is None:
            tried.append(f"{how} unset")
            continue
        spec = importlib.machinery.PathFinder.find_spec("migraphx", [str(folder)])
        if spec is None or spec.loader is None:
            tried.append(f"no migraphx module in {folder} ({how})")
            continue
        if _tensorflow_loaded():
            broken = True
            tried.append(f"{spec.origin} ({how}): {TENSORFLOW_FIRST}")
            continue
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception as exc:  # ImportError from the loader, missing libraries, ABI mismatches
            broken = True
            tried.append(f"{spec.origin} ({how}) failed to load: {error_summary(exc)}")
            continue
        sys.modules["migraphx"] = module  # later `import migraphx` anywhere gets this one
        _FOUND[id(module)] = (module, _lookup(module, how))  # the module is kept, so its id stays its own
        return module, _FOUND[id(module)][1]
    head = "module migraphx found but unusable" if broken else "module migraphx not installed"
    raise MigraphxMissing(f"{head}: {'; '.join(tried)} (ROCm's migraphx package puts it in /opt/rocm/lib)")


def _lookup(module: ModuleType, how: str) -> Lookup:
    return Lookup(how, str(getattr(module, "__file__", "") or ""), str(getattr(module, "__version__", "unknown")))


def status() -> tuple[bool, str]:
    """(usable, reason) for the Devices page, `devices --json` and backend availability."""
    try:
        _module, found = load()
    except MigraphxMissing as exc:
        return False, str(exc)
    return True, f"migraphx {found.version} from {found.path or 'a module without a file'} ({found.how})"


@dataclass(frozen=True)
class TargetSupport:
    """What one target of the installed MIGraphX runs: `refused` maps a precision (or
    "exhaustive_tune") to the library's one-line reason; `error` when the target itself is refused."""

    target: str
    precisions: tuple[str, ...] = ()
    exhaustive_tune: bool = False
    refused: dict[str, str] = field(default_factory=dict, compare=False)
    error: str | None = None


_SUPPORT: dict[tuple[int, str], tuple[ModuleType, TargetSupport]] = {}  # (id(module), target): probed once


def target_support(target: str) -> TargetSupport:
    """Probe `target` with a tiny conv net at every precision (cached per module and target)."""
    try:
        migraphx, _found = load()
    except MigraphxMissing as exc:
        return TargetSupport(target, error=str(exc))
    key = (id(migraphx), target)
    if key not in _SUPPORT:  # the module is kept with its result, so its id cannot be reused by another
        _SUPPORT[key] = (migraphx, _probe(migraphx, target))
    return _SUPPORT[key][1]


def _probe(migraphx: ModuleType, target: str) -> TargetSupport:
    import numpy as np

    try:
        handle = migraphx.get_target(target)
    except Exception as exc:  # e.g. gpu without ROCm: "libmigraphx_gpu.so: cannot open shared object file"
        return TargetSupport(target, error=f"MIGraphX has no {target} target here: {error_summary(exc)}")
    data = _probe_model()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)  # (B, 3, H, W)
    runs, refused = [], {}
    for precision in PRECISIONS:
        try:
            _compile_run(migraphx, handle, data, x, precision, tune=False)
            runs.append(precision)
        except Exception as exc:
            refused[precision] = f"MIGraphX refuses {precision} on its {target} target: {error_summary(exc)}"
    try:
        _compile_run(migraphx, handle, data, x, "fp32", tune=True)
        tune = True
    except Exception as exc:
        tune, refused["exhaustive_tune"] = False, f"MIGraphX refuses exhaustive_tune on {target}: {error_summary(exc)}"
    return TargetSupport(target, tuple(runs), tune, refused)


def _compile_run(migraphx: ModuleType, handle: Any, data: bytes, x: Any, precision: str, *, tune: bool) -> None:
    program = migraphx.parse_onnx_buffer(data)
    quantize(migraphx, program, handle, precision, [{"x": x}])
    program.compile(handle, offload_copy=True, exhaustive_tune=tune)
    program.run({"x": x})


def quantize(migraphx: ModuleType, program: Any, handle: Any, precision: str,
             calibration: list[dict[str, Any]]) -> None:
    """The guide's quantisation step: fp16/bf16 convert in place; int8 calibrates on `calibration`
    ([{input name: (B, 3, H, W) float32}]) for the target it will be compiled for."""
    if precision == "fp16":
        migraphx.quantize_fp16(program)
    elif precision == "bf16":
        migraphx.quantize_bf16(program)
    elif precision == "int8":
        migraphx.quantize_int8(program, handle, [{k: migraphx.argument(v) for k, v in c.items()} for c in calibration])
    elif precision != "fp32":
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")


def _probe_model() -> bytes:
    """Conv 3->4, ReLU, global average pool, MatMul 4->2 on a (1, 3, 8, 8) input "x": the ops Inception needs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal((4, 2)).astype(np.float32), "g")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "g"], ["y"])]
    graph = helper.make_graph(nodes, "probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


# ---------------------------------------------------------------- make install: a build folder into a venv


def usable_folder(lib: Path, dest: Path) -> Path:
    """`lib` itself, or, when its shared-library links were stored as small files naming their target
    (a copy that did not keep symlinks: the loader reads "file too short"), `dest` rebuilt as a folder of
    real symlinks into `lib`. Every library finds its neighbours through RUNPATH=$ORIGIN, so either works."""
    flattened = {p.name: p.read_text().strip() for p in lib.iterdir()
                 if p.is_file() and not p.is_symlink() and ".so" in p.name and p.stat().st_size < 256
                 and (lib / p.read_text(errors="replace").strip()).is_file()}
    if not flattened:
        return lib
    dest.mkdir(parents=True, exist_ok=True)
    for path in lib.iterdir():
        link = dest / path.name
        link.unlink(missing_ok=True)
        link.symlink_to(flattened.get(path.name) or path.resolve())
    return dest


def write_pth(lib: Path, venv: Path) -> Path:
    """A .pth in `venv`'s site-packages naming `lib` (or its repaired copy under `venv`/migraphx-lib)."""
    folder = usable_folder(lib.resolve(), venv.resolve() / "migraphx-lib")
    site = next(iter(sorted((venv / "lib").glob("python3*/site-packages"))))
    pth = site / "dlguide-migraphx.pth"
    pth.write_text(f"{folder}\n")
    return pth


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m dlguide_core.migraphx_lib LIB_FOLDER VENV")
    print(f"MIGraphX: {write_pth(Path(sys.argv[1]), Path(sys.argv[2]))} -> {Path(sys.argv[1])}")
