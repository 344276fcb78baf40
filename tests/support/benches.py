"""The bench/ scripts as modules, for the tests that run them small (the benches run them for the real numbers)."""

from __future__ import annotations

import importlib
from types import ModuleType


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py, imported as bench.NAME (bench/ is a package: its scripts run as `python -m bench.NAME`)."""
    return importlib.import_module(f"bench.{name}")
