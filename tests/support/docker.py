"""A real Docker engine for the image tests and the container bench (issue 42; ../shared/SERVERS.md, "Docker").

- `Engine.start()`: an engine at $DOCKER_HOST when one answers there, else Debian's `dockerd` on a socket of its
  own under STATE (a persistent folder: its layer cache, and the stand-in base below, survive between runs on
  one machine), without touching the host's firewall (`--iptables=false`; `-p 127.0.0.1:PORT:...` is forwarded by
  the userland proxy). A daemon it started, it stops by PID.
- `ensure_base()`: the public `python:3.11-slim-bookworm` when the engine has it (pulled, or made before), else a
  stand-in made once from Debian's own packages (debootstrap) and tagged with the public name, so the Dockerfile's
  `FROM` runs unchanged. Kept: made once per machine.
- `cpu_image`: the `cpu` target built with README's command, its torch wheels from tests/support/docker_wheels.py
  (the public CPU index is unreachable here); `engine_with_cpu_image()`: the same for the container benches.
Builds use the classic builder (DOCKER_BUILDKIT=0): no buildx here, and the Dockerfile needs none.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.docker_wheels import torch_index, torch_index_unavailable_reason
from tests.support.paths import ROOT

STATE = Path(os.environ.get("DLGUIDE_DOCKER_STATE", "/var/tmp/dlguide-docker"))
BASE_IMAGE = "python:3.11-slim-bookworm"
START_TIMEOUT_S = 90.0


def docker_binary() -> str | None:
    """Debian's client beside Debian's daemon when both are there, else whatever `docker` is on PATH."""
    if Path("/usr/bin/docker").exists():
        return "/usr/bin/docker"
    return shutil.which("docker")


def unavailable_reason() -> str | None:
    """Why no engine can be had here (None: one answers at $DOCKER_HOST, or one can be started as root)."""
    if docker_binary() is None:
        return "no docker client (Debian's docker.io; `make test` installs it as root)"
    if os.environ.get("DOCKER_HOST") and _answers(os.environ["DOCKER_HOST"]):
        return None
    if shutil.which("dockerd") is None:
        return "no Docker engine reachable and no dockerd to start (Debian's docker.io; `make test` installs it)"
    if os.geteuid() != 0:
        return "no Docker engine reachable, and starting one (dockerd) needs root"
    return None


def _answers(host: str) -> bool:
    client = docker_binary()
    if client is None:
        return False
    try:
        return subprocess.run([client, "-H", host, "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@dataclass
class Engine:
    """A Docker engine this process talks to: `run(...)` is the `docker` CLI against it."""

    host: str
    pid: int | None = None  # the dockerd we started (stopped by `stop`), None for one we found

    @classmethod
    def start(cls) -> Engine:
        if (host := os.environ.get("DOCKER_HOST")) and _answers(host):
            return cls(host)
        STATE.mkdir(parents=True, exist_ok=True)
        host = f"unix://{STATE / 'docker.sock'}"
        with _locked(STATE / "start.lock"):
            if _answers(host):  # another test run's or bench's daemon: use it, leave it to its owner
                return cls(host)
            for stale in ("docker.sock", "dockerd.pid"):
                (STATE / stale).unlink(missing_ok=True)
            log = open(STATE / "dockerd.log", "ab")
            proc = subprocess.Popen(
                ["dockerd", "--iptables=false", "--ip6tables=false", f"--data-root={STATE / 'root'}",
                 f"--exec-root={STATE / 'exec'}", "-H", host, f"--pidfile={STATE / 'dockerd.pid'}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _answers(host):
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError(f"dockerd did not start (see {STATE / 'dockerd.log'})")
                time.sleep(0.5)
            return cls(host, proc.pid)

    def stop(self) -> None:
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            time.sleep(0.2)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.pid = None

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host, "DOCKER_BUILDKIT": "0"}

    def run(self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        client = docker_binary()
        assert client is not None
        done = subprocess.run([client, *args], env=self.env(), capture_output=True, text=True, timeout=timeout,
                              input=input)
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} -> {done.returncode}\n{done.stdout[-3000:]}\n"
                               f"{done.stderr[-3000:]}")
        return done

    def has_image(self, tag: str) -> bool:
        return self.run("image", "inspect", tag, check=False).returncode == 0

    def inspect(self, name: str) -> dict:
        return json.loads(self.run("inspect", name).stdout)[0]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def base_unavailable_reason() -> str | None:
    if shutil.which("debootstrap") is None:
        return f"{BASE_IMAGE} is not in the engine and debootstrap (to make its stand-in) is missing"
    return None


def ensure_base(engine: Engine) -> str:
    """`python:3.11-slim-bookworm` in the engine: the real one when there, else the Debian stand-in, made once."""
    if engine.has_image(BASE_IMAGE):
        return BASE_IMAGE
    with _locked(STATE / "base.lock"):
        if engine.has_image(BASE_IMAGE):
            return BASE_IMAGE
        root = Path(tempfile.mkdtemp(prefix="base-", dir=STATE))
        try:
            subprocess.run(["debootstrap", "--variant=minbase",
                            "--include=python3,python3-venv,python3-pip,ca-certificates", "bookworm", str(root)],
                           check=True, capture_output=True, timeout=900)
            bundle = Path("/etc/ssl/certs/ca-certificates.crt")  # the package proxy's CA is only in this bundle
            if bundle.exists():
                shutil.copyfile(bundle, root / "etc/ssl/certs/ca-certificates.crt")
            (root / "usr/bin/python").unlink(missing_ok=True)
            (root / "usr/bin/python").symlink_to("python3")
            (root / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
            for cache in (root / "var/cache/apt/archives").glob("*.deb"):
                cache.unlink()
            tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            client = docker_binary()
            assert client is not None
            subprocess.run([client, "import", "--change", "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
                            "--change", 'CMD ["python3"]', "-", BASE_IMAGE],
                           stdin=tar.stdout, env=engine.env(), check=True, capture_output=True, timeout=600)
            tar.wait()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return BASE_IMAGE


IMAGE = "dlguide-cpu"


def build_cpu_image(engine: Engine, context: Path, index_url: str, *, tag: str = IMAGE,
                    timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """README's `docker build --target cpu --build-arg OFFLINE=1 -t dlguide-cpu .`, with the tests' two additions:
    the local wheel index (TORCH_INDEX_URL) and host networking (so the build reaches it and the package index)."""
    return engine.run("build", "--target", "cpu", "--build-arg", "OFFLINE=1", "-t", tag,
                      "--build-arg", f"TORCH_INDEX_URL={index_url}", "--network=host", str(context),
                      timeout=timeout)


class ImageUnavailable(RuntimeError):
    """This machine can give no engine, base or CPU wheels for the `cpu` image; the message says which."""


@contextlib.contextmanager
def engine_with_cpu_image() -> Iterator[Engine]:
    """An engine with README's `cpu` image built in it, for the container benches (bench/); a daemon started for
    it is stopped after. ImageUnavailable (before anything starts, or before the build) where it cannot be had."""
    if reason := unavailable_reason() or torch_index_unavailable_reason():
        raise ImageUnavailable(reason)
    engine = Engine.start()
    try:
        if not engine.has_image(BASE_IMAGE) and (reason := base_unavailable_reason()):
            raise ImageUnavailable(reason)
        ensure_base(engine)
        with torch_index() as url:
            build_cpu_image(engine, ROOT, url)
        yield engine
    finally:
        engine.stop()


# ---------------------------------------------------------------- fixtures (tests/docker/conftest.py imports them)


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Engine]:
    """A Docker engine for the session: the one at $DOCKER_HOST, else a dockerd of our own (stopped by PID)."""
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    engine = Engine.start()
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def docker_base(docker_engine: Engine) -> str:
    """`python:3.11-slim-bookworm` in the engine (the stand-in, made once per machine, where none is)."""
    if not docker_engine.has_image(BASE_IMAGE) and (reason := base_unavailable_reason()) is not None:
        pytest.skip(reason)
    started = time.monotonic()
    base = ensure_base(docker_engine)
    print(f"base image {base} ready in {time.monotonic() - started:.0f} s")
    return base


@pytest.fixture(scope="session")
def cpu_image(docker_engine: Engine, docker_base: str) -> str:
    """The `cpu` target, built with README's command (OFFLINE=1) plus the CPU wheel index and host networking.
    Its time and size are printed (the suite's budget: docs/BENCHMARKS.md)."""
    if (reason := torch_index_unavailable_reason()) is not None:
        pytest.skip(reason)
    started = time.monotonic()
    with torch_index() as url:
        build_cpu_image(docker_engine, ROOT, url)
    size = int(docker_engine.run("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout)
    print(f"{IMAGE} built in {time.monotonic() - started:.0f} s; image size {size / 1e9:.2f} GB")
    return IMAGE
