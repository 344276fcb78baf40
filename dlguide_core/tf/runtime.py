"""The TensorFlow runtime: is it installed, and importing it once per process with its GPUs set.

TensorFlow is optional. `tensorflow_status()` answers without importing it (that takes seconds);
`import_tensorflow()` imports it with memory growth on, pins the process to the GPU the queue gave it,
and registers the Keras objects that saved dlguide models name. The data loaders, the recipes and the
model loader all import TensorFlow through here, so whichever comes first sets the process up.
"""

from __future__ import annotations

import importlib.util
import os
import re
import string
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dlguide_core.errors import DlguideError
from dlguide_core.gpu_slots import gpu_index

INSTALL_HINT = "pip install tensorflow-cpu (tensorflow-rocm on ROCm hosts)"


class TensorFlowUnavailable(DlguideError):
    """TensorFlow is not installed or does not import."""


class TensorFlowDeviceError(DlguideError, ValueError):
    """A TensorFlow recipe's device (cuda, cuda:N) that TensorFlow does not see on this machine."""


@dataclass(frozen=True)
class TensorFlowStatus:
    available: bool
    reason: str


def tensorflow_status() -> TensorFlowStatus:
    """Whether the TensorFlow recipes can run, without importing TensorFlow (that takes seconds)."""
    if importlib.util.find_spec("tensorflow") is None:
        return TensorFlowStatus(False, f"TensorFlow is not installed, so the TensorFlow recipes are hidden: "
                                       f"{INSTALL_HINT}, then restart the app")
    if importlib.util.find_spec("keras") is None:
        return TensorFlowStatus(False, f"Keras is missing next to TensorFlow: {INSTALL_HINT}")
    return TensorFlowStatus(True, "TensorFlow is installed")


# The first import_tensorflow call's (device, slot): TensorFlow fixes its visible GPUs once per process.
_gpu_settings: list[tuple[str, int]] = []
_gpu_lock = threading.Lock()


def import_tensorflow(device: str = "auto", slot: int = 0) -> Any:
    """Import TensorFlow once per process, with memory growth on every GPU.

    Memory growth makes TensorFlow take GPU memory as it needs it instead of all of it
    up front, so it can share a GPU with PyTorch (which runs in other processes).
    The first call's `device` and `slot` pin the GPUs for the whole process; later calls (the
    data loaders, the model loader) get the same module and change nothing, whatever they pass."""
    tf = _tensorflow_module()
    with _gpu_lock:
        if not _gpu_settings:
            _configure_gpus(tf, device, slot)  # a device error leaves it unset: the next call says it again
            _gpu_settings.append((device, slot))
    _register_keras_objects()  # Keras loads TensorFlow's devices: only once the GPUs are set
    return tf


@lru_cache(maxsize=1)
def _tensorflow_module() -> Any:
    status = tensorflow_status()
    if not status.available:
        raise TensorFlowUnavailable(status.reason)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep oneDNN/cpu-feature banners out of job logs
    _load_triton_first()
    _load_migraphx_first()
    try:
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001 - a broken TF install raises anything from ImportError to OSError
        raise TensorFlowUnavailable(f"TensorFlow does not import ({str(exc)[:160]}); reinstall it") from None
    return tf


@lru_cache(maxsize=1)
def _register_keras_objects() -> None:
    import keras

    if keras.saving.get_registered_object("dlguide>custom_standardization") is None:
        keras.saving.register_keras_serializable(package="dlguide")(custom_standardization)


def _load_triton_first() -> None:
    # TensorFlow and Triton (which torchvision and torch.compile import) each bundle LLVM. Loading
    # Triton after TensorFlow segfaults the process (tensorflow-cpu 2.21 with triton 3.8); the other
    # order works. So a process that may meet both (the app, the tests) loads Triton first.
    if importlib.util.find_spec("triton") is not None:
        try:
            import triton  # noqa: F401
        except Exception:  # noqa: BLE001 - a broken Triton only matters to torch.compile
            pass


def _load_migraphx_first() -> None:
    # MIGraphX loaded after TensorFlow aborts the process (clashing protobuf registrations, see
    # migraphx_lib.TENSORFLOW_FIRST); the other order works. A process that may meet both loads MIGraphX first.
    from dlguide_core import migraphx_lib

    try:
        migraphx_lib.load()
    except migraphx_lib.MigraphxMissing:  # not installed (or unusable): nothing can clash
        pass


def _configure_gpus(tf: Any, device: str, slot: int) -> None:
    """cpu hides the GPUs; cuda[:N] demands one (TensorFlow calls it GPU:N); auto takes the queue's slot."""
    gpus = tf.config.list_physical_devices("GPU")
    if device.startswith("cuda"):
        if not gpus:
            raise TensorFlowDeviceError(f"device {device} was asked for, but TensorFlow sees no GPU (tensorflow-cpu, "
                                        f"or no ROCm/CUDA build of TensorFlow); use --device auto or cpu")
        index = device.partition(":")[2]
        if index and int(index) >= len(gpus):
            raise TensorFlowDeviceError(f"device {device} was asked for, but TensorFlow sees {len(gpus)} GPU(s)")
        slot = int(index) if index else slot
    try:
        if device == "cpu":
            tf.config.set_visible_devices([], "GPU")
        elif len(gpus) > 1:
            tf.config.set_visible_devices([gpus[gpu_index(slot, len(gpus))]], "GPU")  # the slot the queue gave
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError:
        pass  # TensorFlow already initialised its GPUs in this process: the settings are fixed by then


def custom_standardization(input_data: Any) -> Any:
    """The guide's standardisation: lower-case, `<br />` -> space, strip ASCII punctuation.

    Here, not beside the IMDB model, because a saved text model names it: every process that may load
    one registers it when it imports TensorFlow (see _register_keras_objects)."""
    import tensorflow as tf

    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")
