"""The project's one door to torchvision: `from dlguide_core.torchvision_lib import datasets, models, transforms`.

Importing torchvision 0.20-0.29 imports all of `torch._dynamo` (torchvision/ops/roi_align.py, at module level:
`from torch._dynamo.utils import is_compile_supported`). That is about 1.5 s of CPU and of wall time in every
process that loads a model or a dataset (each server, training job, torchrun rank, export and CLI call), though
none of them compiles anything unless asked, and roi_align is not used by any model dlguide serves or trains.

So the first torchvision import of a process goes through `_import_torchvision`: for the length of that import,
`torch._dynamo` and `torch._dynamo.utils` are stand-ins whose only name, `is_compile_supported`, imports the real
module when it is first called. After the import the stand-ins are gone from sys.modules, and whatever does need
dynamo (torch.compile, the dynamo ONNX export, zentorch) imports the real one as it always did. Any other name
asked of a stand-in loads the real module too, so nothing can see a half of dynamo.

The stand-ins are used only where they are known to be enough: a torchvision whose version is in STANDIN_VERSIONS
(each one's module-level dynamo imports were read from its wheel: that one line, unchanged from 0.20 to 0.29),
and a process that has not imported torch._dynamo or torchvision already. Anywhere else it is the plain import.
DLGUIDE_PLAIN_TORCHVISION_IMPORT=1 turns the stand-ins off. tests/test_architecture.py keeps every other module
of the project from importing torchvision itself.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import threading
import types
from typing import Any

STANDIN_VERSIONS = tuple(f"0.{minor}." for minor in range(20, 30))  # torchvision 0.20.x - 0.29.x
PLAIN_IMPORT_ENV = "DLGUIDE_PLAIN_TORCHVISION_IMPORT"
_DYNAMO = "torch._dynamo"
_UTILS = "torch._dynamo.utils"
_lock = threading.Lock()


def _real_dynamo_utils() -> types.ModuleType:
    """The real torch._dynamo.utils, the stand-ins taken out of sys.modules first (idempotent)."""
    for name in (_UTILS, _DYNAMO):
        if getattr(sys.modules.get(name), "_dlguide_standin", False):
            del sys.modules[name]
    return importlib.import_module(_UTILS)


def _standin(name: str) -> types.ModuleType:
    module = types.ModuleType(name, "dlguide's stand-in during torchvision's import (dlguide_core/torchvision_lib.py)")
    module._dlguide_standin = True  # type: ignore[attr-defined]

    def __getattr__(attr: str) -> Any:  # anything but is_compile_supported: the real module, whole
        if attr.startswith("__") and attr.endswith("__"):  # inspect's scans of sys.modules ask for __file__
            raise AttributeError(attr)
        real = _real_dynamo_utils()
        return getattr(real if name == _UTILS else sys.modules[_DYNAMO], attr)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def is_compile_supported(device_type: str) -> bool:
    """torch._dynamo.utils.is_compile_supported, imported when torchvision first calls it."""
    return bool(_real_dynamo_utils().is_compile_supported(device_type))


def _standins_apply() -> bool:
    if os.environ.get(PLAIN_IMPORT_ENV) == "1" or _DYNAMO in sys.modules or "torchvision" in sys.modules:
        return False
    try:
        version = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:  # a source build on the path: no metadata to go by
        return False
    return version.startswith(STANDIN_VERSIONS)


def _import_torchvision() -> None:
    with _lock:
        if not _standins_apply():
            importlib.import_module("torchvision")
            return
        import torch

        package, utils = _standin(_DYNAMO), _standin(_UTILS)
        package.__path__ = []  # a package, so `torch._dynamo.utils` resolves to the stand-in below
        utils.is_compile_supported = is_compile_supported  # type: ignore[attr-defined]
        package.utils = utils  # type: ignore[attr-defined]
        sys.modules[_DYNAMO], sys.modules[_UTILS] = package, utils
        try:
            importlib.import_module("torchvision")
        finally:
            for name, standin in ((_UTILS, utils), (_DYNAMO, package)):
                if sys.modules.get(name) is standin:
                    del sys.modules[name]
            if torch.__dict__.get("_dynamo") is package:  # torch imports the real one on first use (its __getattr__)
                del torch.__dict__["_dynamo"]


_import_torchvision()

import torchvision  # noqa: E402  (loaded above; these are its modules, typed)
from torchvision import datasets, models, transforms  # noqa: E402

__all__ = ["datasets", "models", "torchvision", "transforms"]
