"""The inference backends' classes by name: which exist, whether each can run here, preparing one, and labels.

The names, labels and ranking are declared in `specs`; each name's class is the Backend subclass of that name in
`backend_<name>.py`, imported when first asked for (a backend module's own imports stay in its functions).
The backends themselves know nothing of this module.
"""

from __future__ import annotations

import importlib
import inspect
from functools import cache

from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import Availability, Backend, BackendOptions, Progress
from dlguide_core.vision.models import LoadedModel


@cache
def backend_class(name: str) -> type[Backend]:
    """The class of backend `name` (ValueError naming the choices for an unknown one)."""
    if name not in specs.SPEC:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(specs.NAMES)}")
    module = importlib.import_module(f"{__package__}.backend_{name}")  # dlguide_core/inference/backend_<name>.py
    found = [cls for _, cls in inspect.getmembers(module, inspect.isclass)
             if issubclass(cls, Backend) and cls.__module__ == module.__name__ and cls.name == name]
    if len(found) != 1:
        raise LookupError(f"{module.__name__} must define one Backend subclass named {name!r}, not {len(found)}")
    return found[0]


def backend_classes() -> list[type[Backend]]:
    return [backend_class(name) for name in specs.NAMES]


def backend_status(options: BackendOptions | None = None) -> list[Availability]:
    """Every backend with whether it can run here and why (or why not)."""
    return [cls.availability(options) for cls in backend_classes()]


def prepare_backend(name: str, loaded: LoadedModel, *, batch_size: int = 1, options: BackendOptions | None = None,
                    progress: Progress | None = None) -> Backend:
    """A ready-to-run backend; BackendUnavailable/BackendError (one line) when it cannot be."""
    return backend_class(name)(options).prepare(loaded, batch_size=batch_size, progress=progress)


def precompile(name: str, loaded: LoadedModel, *, batch_size: int = 1, options: BackendOptions | None = None,
               progress: Progress | None = None) -> None:
    """Do the slow, disk-cached part of preparing, with progress (`Backend.precompile`: the ONNX export; for
    MIGraphX, compiling to .mxr). A later `prepare_backend` (e.g. inside a UI cache, which cannot report
    progress) then only loads files. Eager PyTorch has nothing to precompile."""
    progress = progress or (lambda _msg, _frac: None)
    backend_class(name)(options).precompile(loaded, batch_size=batch_size, progress=progress)
    progress("Ready", 1.0)


def backend_label(name: str, provider: str | None = None) -> str:
    """A bench row's or a prepared backend's name for people: "MIGraphX (CPU)" for provider migraphx:cpu
    (a provider "<name>:<target>…" names the target where the label depends on it)."""
    spec = specs.SPEC.get(name)
    if spec is None:
        return name
    target = next((t for t, _ in spec.target_labels if (provider or "").startswith(f"{name}:{t}")), None)
    return spec.label_for(target)
