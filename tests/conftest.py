"""Shared fixtures: an isolated DLGUIDE_HOME per test, a stand-in for the ImageNet
weights file, and a served app + headless Debian chromium for browser tests."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from tests.support.built_once import built_once, prepare_booth_home, seed_home
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.scheduling import LONG_FIRST, work_unit, worker_group
from tests.support.servers import AppURL, Served, start_served
from tests.support.standin_weights import standin_imagenet_state

SHARED_DATA = ROOT.parent / "shared" / "data"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`gpu` tests need a CUDA or ROCm GPU: skipped, with the reason, where PyTorch sees none."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a GPU (PyTorch sees none); run `pytest -m gpu` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _recipe_registry_loaded() -> None:
    """Register the catalog's job kinds once, up front, into the real registry: a test that
    swaps the registry for a copy must not be the one whose copy receives (and loses) them."""
    from dlguide_core.jobs.catalog import register_job_kinds

    register_job_kinds()


@pytest.fixture(autouse=True)
def _main_module_kept() -> Iterator[None]:
    """A Streamlit AppTest runs its script as `__main__` and leaves it so: a later `mp.spawn` child then re-runs
    that script (multiprocessing re-imports the parent's `__main__` from its file) and dies. Put it back."""
    import sys

    main = sys.modules.get("__main__")
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    yield
    sys.modules["__main__"] = main  # type: ignore[assignment]
    for name, value in saved.items():
        setattr(main, name, value)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own DLGUIDE_HOME and never touches the network."""
    home = tmp_path / "dlguide_home"
    monkeypatch.setenv("DLGUIDE_HOME", str(home))
    monkeypatch.setenv("DLGUIDE_OFFLINE", "1")
    monkeypatch.delenv("DLGUIDE_DATA_ROOTS", raising=False)
    monkeypatch.delenv("DLGUIDE_STORE_URL", raising=False)
    monkeypatch.delenv("DLGUIDE_KIOSK", raising=False)
    return home




@pytest.fixture(scope="session")
def imagenet_state_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in ImageNet weights in a TORCH_HOME, one file for the whole run (every worker): the same
    fingerprint everywhere, so the caches keyed by it (booth_home) are shared too. Read-only."""
    from dlguide_core.vision.models import imagenet_weights_path

    cached = Path("hub", "checkpoints", imagenet_weights_path().name)  # under TORCH_HOME, as torch.hub keeps it

    def build(torch_home: Path) -> None:
        (torch_home / cached).parent.mkdir(parents=True)
        torch.save(standin_imagenet_state(), torch_home / cached)

    return built_once(tmp_path_factory, "torch_home", build) / cached


@pytest.fixture(scope="session")
def prepared_booth(tmp_path_factory: pytest.TempPathFactory, imagenet_state_file: Path) -> Path:
    """A DLGUIDE_HOME where the booth was prepared once for the stand-in ImageNet weights (its ONNX export,
    int8 model and MIGraphX program: tests.support.built_once), for the whole run. Read-only: seed_home copies."""
    return built_once(tmp_path_factory, "booth_home",
                      lambda home: prepare_booth_home(home, imagenet_state_file.parents[2]))


@pytest.fixture
def booth_home(prepared_booth: Path, isolated_home: Path, fake_imagenet: Path) -> Path:
    """This test's DLGUIDE_HOME, holding the prepared booth's caches, as after an earlier start on these weights."""
    return seed_home(prepared_booth, isolated_home)


@pytest.fixture
def fake_imagenet(imagenet_state_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TORCH_HOME holding a state-dict file where torchvision caches IMAGENET1K_V1."""
    monkeypatch.setenv("TORCH_HOME", str(imagenet_state_file.parents[2]))
    return imagenet_state_file


@pytest.fixture(scope="session")
def cifar_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny CIFAR CNN checkpoint and its ONNX export, made once for the whole run (every worker; read-only)."""
    from tests.support.compiled_helpers import exported_cifar

    folder = built_once(tmp_path_factory, "cifar_export", exported_cifar)
    (onnx_path,) = (folder / "home" / "exports").glob("*.onnx")
    return folder / "cifar.pt", onnx_path


@pytest.fixture
def cifar(cifar_files):
    """The tiny CIFAR model, its export already in this test's DLGUIDE_HOME cache."""
    from dlguide_core.vision.models import load_model
    from tests.support.compiled_helpers import seed_export_cache

    loaded = load_model(str(cifar_files[0]), device="cpu")
    seed_export_cache(loaded, cifar_files[1])
    return loaded


@pytest.fixture
def sample_jpeg() -> Path:
    return ROOT / "dlguide_core" / "samples" / "chelsea.jpg"


# ---------------------------------------------------------------- parallel runs (`make test`: pytest-xdist)

@pytest.hookimpl(optionalhook=True)  # a plain pytest without xdist (the GPU machine's image) skips it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`-n N`: whole files (and clusters' groups) per worker, module- and session-scoped servers started once,
    the long groups first. (xdist's own `--dist loadgroup` marks do not reach its scheduler under pytest 9.2.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkerGroup(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            if not self.ordered:  # the first assignment: the queue holds every group, in collection order
                self.ordered = True
                rank = {group: i for i, group in enumerate(LONG_FIRST)}
                queue = sorted(self.workqueue.items(), key=lambda unit: rank.get(unit[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(queue)
            super()._assign_work_unit(node)

    return ByWorkerGroup(config, log)


# ---------------------------------------------------------------- browser tests


@pytest.fixture
def app_server(tmp_path: Path) -> Iterator[Callable[..., AppURL]]:
    """Factory: `url = app_server(ENV_VAR=value, ...)` serves the app as `make run` does, on a free loopback port
    (in booth mode, serve.py prepares the booth before the port opens: hence the long health wait).

    The server inherits the test's environment (DLGUIDE_HOME, TORCH_HOME, ...) plus the overrides; it is stopped
    when the test ends. Its log is at tmp_path/streamlit-PORT.log. The URL is a str that knows the server's token:
    a browser opens `url.link("/train")` first (tests.support.servers)."""
    started: list[Served] = []

    def start(**env_overrides: str) -> AppURL:
        port = free_port()
        env = {**{k: str(v) for k, v in env_overrides.items()}, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1"}
        # `make run`'s command line (serve.py, .streamlit/config.toml); only the port and the environment differ
        started.append(start_served(tmp_path / f"streamlit-{port}.log", env, port=port))
        return started[-1].url

    yield start
    for served in started:
        served.stop()


@pytest.fixture(scope="session")
def browser():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Debian chromium is missing in CI: `make test` should have installed it")
        pytest.skip("Debian chromium not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield instance
        instance.close()


@pytest.fixture
def camera_page(browser):
    """A page of a second chromium that has a camera: Chromium's fake capture device (a moving test pattern), its
    permission granted. A browser of its own: the suite's other pages keep no camera (a live stream costs CPU)."""
    instance = browser.browser_type.launch(executable_path=CHROMIUM, args=[
        *CHROMIUM_FLAGS, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"])
    context = instance.new_context(viewport={"width": 1400, "height": 1000}, permissions=["camera"])
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    instance.close()


@pytest.fixture
def browser_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


# ---------------------------------------------------------------- the job store's backends


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL server for the session (tests.support.postgres); skipped with the reason."""
    from tests.support.postgres import PostgresServer, unavailable_reason

    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> str:
    """DLGUIDE_STORE_URL for each backend: the default SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        monkeypatch.delenv("DLGUIDE_STORE_URL", raising=False)
        return f"sqlite:///{isolated_home / 'jobs.db'}"
    url = request.getfixturevalue("postgres_server").create_database()
    monkeypatch.setenv("DLGUIDE_STORE_URL", url)
    return url


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real single-node Slurm (tests/support/slurm.py) for the session; SLURM_CONF points at it meanwhile."""
    from tests.support import slurm

    if reason := slurm.missing_reason():
        pytest.skip(reason)
    with slurm.serving(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


@pytest.fixture(scope="module", autouse=True)
def _slurm_jobs_end_with_their_module(request: pytest.FixtureRequest,
                                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A test file on the shared Slurm cluster leaves no job running behind it: a test that failed before its own
    cancel (a timeout on a loaded machine) would otherwise leave a long run training beside every later test.
    Only ever on the tests' own cluster (its slurm.conf under this run's temp folder), never a SLURM_CONF of the
    developer's."""
    yield
    conf = os.environ.get("SLURM_CONF")
    if (worker_group(request.node.nodeid.split("::")[0]) == "slurm" and conf
            and Path(conf).resolve().is_relative_to(tmp_path_factory.getbasetemp().resolve())):
        subprocess.run(["scancel", "--user", getpass.getuser()], env={**os.environ, "SLURM_CONF": conf},
                       capture_output=True, timeout=60, check=False)


# ---------------------------------------------------------------- Ray


@pytest.fixture(scope="session")
def ray_head() -> Iterator[object]:
    """One real Ray head on loopback for the whole session (about 15-20 s to start, 1.6 GB): tests.support.ray_cluster.
    Loopback requests must not go through a proxy (Ray's client honours http_proxy even for 127.0.0.1)."""
    from tests.support.ray_cluster import NO_PROXY, ray_available, start_head, stop_head

    if (reason := ray_available()) is not None:
        pytest.skip(reason)
    saved = {key: os.environ.get(key) for key in NO_PROXY}
    os.environ.update(NO_PROXY)
    head = start_head(num_cpus=4)  # logical CPUs: the tests run a 1-, a 2- and a 1-CPU job at once
    try:
        yield head
    finally:
        stop_head(head)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
