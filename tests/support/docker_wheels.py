"""The `cpu` image's torch wheels on a machine that cannot reach the CPU wheel index (tests/support/docker.py).

The Dockerfile's `cpu` stage installs torch and torchvision from TORCH_INDEX_URL (by default PyTorch's CPU index,
unreachable here). `torch_index()` serves the build a PEP 503 index on loopback instead: this machine's local wheel
indexes, with torch's page listing only the local CPU torch (PyPI's torch is the CUDA build, GBs of nvidia wheels).

torchvision has no CPU build here: every local torchvision (PyPI's) has its compiled ops linked against the CUDA
torch, and beside a CPU torch its import fails ("operator torchvision::nms does not exist": its ops library does not
load, and torchvision then registers fake kernels for ops that were never defined). So the index serves a stand-in,
made here from the local torchvision that pairs with the CPU torch (0.(minor+15)): the same wheel with those fake
registrations made conditional on the ops library having loaded, as torchvision's other registrations already are.
dlguide uses no torchvision op (models, transforms, datasets only), so the app runs on it as on the CPU index's
torchvision. Test scaffolding, like the stand-in base image: the Dockerfile is unchanged for the real index.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

# This machine's wheels: pip's find-links folder (the CPU torch wheel) and its two local indexes.
LOCAL_INDEXES = (Path("/opt/pypi-more"), Path("/opt/pypi"))
WHEEL_FOLDERS = (Path("/opt/wheels"), *(index / "files" for index in LOCAL_INDEXES))
# A fixed port when free, so that the build argument (the index's URL) and with it the engine's layer cache key stay
# the same from one run to the next; another port only costs a rebuild of the torch layer.
INDEX_PORT = 38411
FAKE_REGISTRATION = '@torch.library.register_fake('
CONDITIONAL_REGISTRATION = ('@(lambda name: torch.library.register_fake(name) if torchvision.extension._has_ops() '
                            'else (lambda fn: fn))(')


def _wheels(pattern: str) -> dict[str, Path]:
    return {w.name: w for folder in WHEEL_FOLDERS if folder.is_dir() for w in folder.glob(pattern)}


def local_cpu_torch_wheels() -> list[Path]:
    """This machine's CPU torch wheels for the base's Python (cp311, a `+cpu` build), newest last."""
    found = _wheels("torch-*+cpu-cp311-*manylinux*x86_64.whl")
    return [found[name] for name in sorted(found)]


def paired_torchvision(torch_wheel: Path) -> Path | None:
    """The local torchvision wheel released with `torch_wheel` (torch 2.N pairs with torchvision 0.(N+15))."""
    match = re.match(r"torch-2\.(\d+)\.", torch_wheel.name)
    if match is None:
        return None
    found = _wheels(f"torchvision-0.{int(match.group(1)) + 15}.*-cp311-*manylinux*x86_64.whl")
    return found[max(found)] if found else None


def _cpu_pair() -> tuple[Path, Path] | None:
    for torch_wheel in reversed(local_cpu_torch_wheels()):
        if (vision := paired_torchvision(torch_wheel)) is not None:
            return torch_wheel, vision
    return None


def torch_index_unavailable_reason() -> str | None:
    """Why the build cannot get CPU torch wheels here (None: DLGUIDE_TORCH_INDEX_URL is set, or a local CPU torch
    and its torchvision exist). The tests never fall back to PyPI's CUDA torch (GBs)."""
    if os.environ.get("DLGUIDE_TORCH_INDEX_URL") or _cpu_pair() is not None:
        return None
    have = ", ".join(w.name.split("-")[1] for w in local_cpu_torch_wheels()) or "none"
    return (f"no local CPU torch wheel with its torchvision (CPU torch: {have}): set DLGUIDE_TORCH_INDEX_URL to a "
            "CPU wheel index (https://download.pytorch.org/whl/cpu where reachable) to build the cpu image")


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def standin_torchvision(wheel: Path, into: Path) -> Path:
    """`wheel` rewritten into `into` (same name): its fake-kernel registrations only when its ops library loaded."""
    out = into / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        contents = {info.filename: source.read(info) for info in source.infolist()}
        module = "torchvision/_meta_registrations.py"
        text = contents[module].decode()
        assert FAKE_REGISTRATION in text, f"{wheel.name}: no fake registration to make conditional"
        contents[module] = text.replace(FAKE_REGISTRATION, CONDITIONAL_REGISTRATION).encode()
        (record,) = [name for name in contents if name.endswith(".dist-info/RECORD")]
        lines = [f"{module},{_record_hash(contents[module])},{len(contents[module])}" if line.startswith(f"{module},")
                 else line for line in contents[record].decode().splitlines()]
        contents[record] = ("\n".join(lines) + "\n").encode()
        for name, data in contents.items():
            target.writestr(name, data)
    return out


def merged_index(into: Path) -> Path:
    """One PEP 503 tree (`simple/`, `files/`) over the local indexes, torch's page listing the CPU torch only and
    torchvision's its stand-in: what the build's `pip install --index-url` needs for torch, torchvision and their
    dependencies."""
    (into / "simple").mkdir(parents=True, exist_ok=True)
    (into / "files").mkdir(exist_ok=True)
    for index in LOCAL_INDEXES:
        for package in sorted((index / "simple").iterdir()) if (index / "simple").is_dir() else ():
            link = into / "simple" / package.name
            if package.name not in ("torch", "torchvision") and not link.exists():
                link.symlink_to(package)
    for folder in WHEEL_FOLDERS:
        for wheel in folder.iterdir() if folder.is_dir() else ():
            link = into / "files" / wheel.name
            if not link.exists() and not wheel.name.startswith("torchvision-"):
                link.symlink_to(wheel)
    pair = _cpu_pair()
    assert pair is not None, torch_index_unavailable_reason()
    served = {"torch": pair[0], "torchvision": standin_torchvision(pair[1], into / "files")}
    for package, wheel in served.items():
        (into / "simple" / package).mkdir()
        page = f'<!DOCTYPE html><html><body>\n<a href="../../files/{wheel.name}">{wheel.name}</a>\n</body></html>\n'
        (into / "simple" / package / "index.html").write_text(page)
    return into


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _server(tree: Path) -> http.server.ThreadingHTTPServer:
    def handler(*args: object, **kwargs: object) -> _QuietHandler:
        return _QuietHandler(*args, directory=str(tree), **kwargs)  # type: ignore[arg-type]

    try:
        return http.server.ThreadingHTTPServer(("127.0.0.1", INDEX_PORT), handler)  # type: ignore[arg-type]
    except OSError:
        return http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # type: ignore[arg-type]


@contextlib.contextmanager
def torch_index() -> Iterator[str]:
    """The build's TORCH_INDEX_URL: DLGUIDE_TORCH_INDEX_URL when set, else the merged local index served on loopback
    (its `simple/` URL; the build reaches it through `--network=host`)."""
    if url := os.environ.get("DLGUIDE_TORCH_INDEX_URL"):
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="dlguide-index-") as folder:
        server = _server(merged_index(Path(folder)))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
        finally:
            server.shutdown()
            server.server_close()
