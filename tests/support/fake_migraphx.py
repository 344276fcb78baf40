"""A FAKE `migraphx` module, ONLY for MIGraphX's `gpu` target: no ROCm, no GPU, not AMD's code.

Everything the real library can do here (the `cpu` and `ref` targets of ../shared/migraphx)
is tested against the real module (tests/inference/test_backend_migraphx.py); this fake stands in only
where the real build cannot reach: the `gpu` target on a ROCm host (what the adapter asks of
it, and the shapes it passes). tests/inference/test_backend_migraphx.py checks that every attribute and
signature offered here exists in the real module.

It follows the documented Python API of MIGraphX (src/py/migraphx_py.cpp: parse_onnx
with map_input_dims, get_target, program.compile(t, offload_copy, fast_math,
exhaustive_tune), get_parameter_names/get_parameter_shapes, run({name: array}) ->
[argument], save/load (.mxr, msgpack), quantize_fp16, quantize_int8, argument,
generate_argument, shape) and records every call, so tests can check what our adapter
asks of MIGraphX and the shapes it passes. Programs "run" with ONNX Runtime on the CPU,
so outputs are real logits; like the real thing, a compiled program accepts only the
exact parameter shapes it was compiled for.
"""

from __future__ import annotations

import importlib.machinery
import json
import types
from pathlib import Path
from typing import Any

import numpy as np


class shape:  # noqa: N801 - mirrors migraphx.shape
    def __init__(self, type: str = "float_type", lens: list[int] | None = None) -> None:  # noqa: A002
        self._type, self._lens = type, list(lens or [])

    def lens(self) -> list[int]:
        return list(self._lens)

    def type(self) -> str:
        return self._type

    def elements(self) -> int:
        return int(np.prod(self._lens)) if self._lens else 1


class argument:  # noqa: N801 - mirrors migraphx.argument (buffer-like: np.array(arg) works)
    def __init__(self, data: Any) -> None:
        self._data = np.asarray(data)

    def get_shape(self) -> shape:
        return shape("float_type", list(self._data.shape))

    def tolist(self) -> list:
        return self._data.ravel().tolist()

    def __array__(self, dtype=None, copy=None):
        return self._data if dtype is None else self._data.astype(dtype)


class target:  # noqa: N801 - the real target has no public attributes
    def __init__(self, name: str) -> None:
        self._name = name


class program:  # noqa: N801
    def __init__(self, module: FakeMigraphx, onnx_path: str | bytes, dims: dict[str, list[int]]) -> None:
        self._module, self.onnx_path, self.dims = module, onnx_path, dims
        self.compiled_for: str | None = None
        self.quantized: str | None = None
        self._session = None

    def get_parameter_names(self) -> list[str]:
        return list(self.dims)

    def get_parameter_shapes(self) -> dict[str, shape]:
        return {name: shape("float_type", lens) for name, lens in self.dims.items()}

    def compile(self, t: target, offload_copy: bool = True, fast_math: bool = True,
                exhaustive_tune: bool = False) -> None:
        self._module.calls.append(("compile", {"target": t._name, "offload_copy": offload_copy,
                                               "fast_math": fast_math, "exhaustive_tune": exhaustive_tune}))
        if self._module.fail_compile:
            raise RuntimeError("fake migraphx: compile failed on purpose")
        self.compiled_for = t._name

    def run(self, params: dict[str, np.ndarray]) -> list[argument]:
        self._module.calls.append(("run", {k: tuple(np.asarray(v).shape) for k, v in params.items()}))
        if self.compiled_for is None:
            raise RuntimeError("fake migraphx: program not compiled")
        for name, lens in self.dims.items():
            if list(np.asarray(params[name]).shape) != lens:
                raise RuntimeError(f"fake migraphx: {name} has shape {np.asarray(params[name]).shape}, "
                                   f"compiled for {lens}")
        return [argument(self._ort().run(None, {k: np.asarray(v) for k, v in params.items()})[0])]

    def _ort(self):
        if self._session is None:
            from dlguide_core import onnxruntime_lib

            self._session = onnxruntime_lib.load().InferenceSession(self.onnx_path, providers=["CPUExecutionProvider"])
        return self._session


class FakeMigraphx(types.ModuleType):
    """Install with monkeypatch.setitem(sys.modules, "migraphx", FakeMigraphx())."""

    shape, argument, target, program = shape, argument, target, program
    TARGETS = ("gpu", "cpu", "ref")

    def __init__(self) -> None:
        super().__init__("migraphx")
        self.__spec__ = importlib.machinery.ModuleSpec("migraphx", None)  # so find_spec() sees it
        self.__version__ = "fake"
        self.calls: list[tuple[str, Any]] = []
        self.fail_compile = False

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def parse_onnx(self, filename: str, default_dim_value: int = 0, map_input_dims: dict | None = None,
                   skip_unknown_operators: bool = False, print_program_on_error: bool = False) -> program:
        dims = {k: list(v) for k, v in (map_input_dims or {}).items()}
        self.calls.append(("parse_onnx", {"filename": filename, "map_input_dims": dims}))
        if not Path(filename).is_file():
            raise RuntimeError(f"fake migraphx: no such file {filename}")
        return program(self, filename, dims)

    def parse_onnx_buffer(self, input: bytes, default_dim_value: int = 0, map_input_dims: dict | None = None,  # noqa: A002
                          skip_unknown_operators: bool = False, print_program_on_error: bool = False) -> program:
        import onnx

        self.calls.append(("parse_onnx_buffer", {"bytes": len(input)}))
        graph = onnx.load_from_string(input).graph
        dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
        dims.update({k: list(v) for k, v in (map_input_dims or {}).items()})
        return program(self, input, dims)

    def get_target(self, name: str) -> target:
        self.calls.append(("get_target", name))
        if name not in self.TARGETS:
            raise RuntimeError(f"fake migraphx: unknown target {name}")
        return target(name)

    def quantize_fp16(self, prog: program, ins_names: list[str] | None = None) -> None:
        self.calls.append(("quantize_fp16", {"ins_names": ins_names or ["all"]}))
        prog.quantized = "fp16"

    def quantize_bf16(self, prog: program, ins_names: list[str] | None = None) -> None:
        self.calls.append(("quantize_bf16", {"ins_names": ins_names or ["all"]}))
        prog.quantized = "bf16"

    def quantize_int8(self, prog: program, t: target, calibration: list | None = None,
                      ins_names: set[str] | None = None) -> None:
        shapes = [{k: tuple(np.asarray(v).shape) for k, v in cal.items()} for cal in calibration or []]
        self.calls.append(("quantize_int8", {"target": t._name, "calibration": shapes}))
        prog.quantized = "int8"

    def save(self, p: program, filename: str, format: str = "msgpack") -> None:  # noqa: A002
        self.calls.append(("save", {"filename": filename, "format": format}))
        Path(filename).write_text(json.dumps({"onnx": p.onnx_path, "dims": p.dims, "target": p.compiled_for,
                                              "quantized": p.quantized}))

    def load(self, filename: str, format: str = "msgpack") -> program:  # noqa: A002
        self.calls.append(("load", {"filename": filename, "format": format}))
        data = json.loads(Path(filename).read_text())
        prog = program(self, data["onnx"], data["dims"])
        prog.compiled_for, prog.quantized = data["target"], data["quantized"]
        return prog

    def generate_argument(self, s: shape, seed: int = 0) -> argument:
        return argument(np.random.default_rng(seed).standard_normal(s.lens()).astype(np.float32))


def real_migraphx():
    """The real migraphx module, or skip the test: not loadable here, or the fake is what is installed."""
    import pytest

    from dlguide_core import migraphx_lib

    try:
        module, _found = migraphx_lib.load()
    except migraphx_lib.MigraphxMissing as exc:
        pytest.skip(f"real MIGraphX not loadable ({exc}); `make install` makes ../shared/migraphx importable")
    if isinstance(module, FakeMigraphx):
        pytest.skip("the fake migraphx is installed")
    return module
