"""The bench/ scripts as modules, for the tests that run them small (the benches run them for the real numbers)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py imported as the module NAME."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module
