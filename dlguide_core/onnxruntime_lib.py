"""The project's one door to ONNX Runtime: `onnxruntime_lib.load()` instead of `import onnxruntime`.

ONNX Runtime 1.29 and later send telemetry to Microsoft from Linux too (a 1DS uploader: a `ProcessInfo` event at
start, session and model events later, to mobile.events.data.microsoft.com), keep a device identifier and an
event database under ~/.cache/Microsoft/DeveloperTools/.onnxruntime, and at process exit wait for the uploader.
dlguide is local by default, so that must not happen. It was also a bug here: on a host whose DNS server does not
answer (a container with no way out, a lab behind a firewall) each lookup waits 20 s, and a server that had used
ONNX Runtime outlived Docker's 10 s between SIGTERM and SIGKILL (`docker stop`), seen in a stack of the stopping
server: its main thread in ONNX Runtime's exit handlers, two threads resolving that address
(bench/bench_container_stop.py: after a minute's serving, every stop of the server waited so).

ORT_DISABLE_TELEMETRY=1 is ONNX Runtime's full opt-out on Linux when it is set before the library starts: no
uploader, no identifier, no database, nothing sent. `load()` sets it (unless the user set the variable: their
choice stands) before the first import, in this process and so in every process it starts; the Python call
`disable_telemetry_events()` alone would come after the start event. tests/test_architecture.py keeps every
other module of the project from importing onnxruntime itself.
"""

from __future__ import annotations

import os
from types import ModuleType

TELEMETRY_ENV, TELEMETRY_OFF = "ORT_DISABLE_TELEMETRY", "1"


def keep_telemetry_off() -> None:
    """ONNX Runtime's telemetry off for this process and its children, unless ORT_DISABLE_TELEMETRY is set."""
    os.environ.setdefault(TELEMETRY_ENV, TELEMETRY_OFF)


def load() -> ModuleType:
    """The `onnxruntime` module, its telemetry off; ImportError when it is not installed."""
    keep_telemetry_off()
    import onnxruntime

    return onnxruntime


def load_quantization() -> ModuleType:
    """`onnxruntime.quantization` (static int8), through the same door."""
    load()
    import onnxruntime.quantization

    return onnxruntime.quantization
