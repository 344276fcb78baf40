"""Serve dlguide: the one way the app starts (`make run`, `make kiosk`, `make dev`, the Dockerfile, tests, bench/).

    python serve.py [--no-warm] [streamlit run options, e.g. --server.port 8501]

It runs `streamlit run app.py` in this process, after four things `streamlit run` alone gets wrong here:

1. One router from the first second. Streamlit 1.67 routes a `pages/` folder beside the entry script by
   file name ("multipage v1": every file of pages/, helpers included, becomes a page and app.py is
   bypassed) until some session of the process calls st.navigation. The switch is a class attribute,
   `PagesManager.uses_pages_directory`, set from "is there a pages/ folder?" only while it is still None;
   setting it to False before the server starts leaves app.py's st.navigation the only router.
2. A warm app. Before the server opens its port, the heavy imports (torch, torchvision, the pages' helpers),
   the device probe and the default model are loaded into the same cache entries the pages read, so the
   first visitor sees the navigation and the uploader at once, not a blank page while torch imports
   (issue 18). With DLGUIDE_KIOSK=1 the booth's model, backend (ONNX export and session, or a MIGraphX
   compile) and attract view are prepared the same way; its ImageNet weights are checked first (downloaded
   when online, as the app and the CLI do). `--no-warm` opens the port at once.
3. Local unless told otherwise (issue 22). It listens on DLGUIDE_ADDRESS (default 127.0.0.1) unless
   `--server.address` is given, and every request whose Host is not in DLGUIDE_ALLOWED_HOSTS (default
   localhost,127.0.0.1,[::1]) gets HTTP 400 before Streamlit sees it, the websocket upgrade included.
   Serving to a network without DLGUIDE_ALLOWED_HOSTS refuses to start; without sign-in it warns.
4. A token (issue 33): loopback is shared by every user of the machine. Unless sign-in ([auth]) is configured,
   the full app answers only visitors with its token (web/token_gate.py: DLGUIDE_TOKEN, else
   $DLGUIDE_HOME/server-token), and prints `http://127.0.0.1:PORT/?token=…`. The booth is public and read-only.

The served configuration is .streamlit/config.toml (file watcher off); `make dev` adds live reload.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import urllib.request
from pathlib import Path

from web.stack import say

ROOT = Path(__file__).resolve().parent
APP = ROOT / "app.py"


def command(port: int, *options: str) -> list[str]:
    """The command line `make run` serves with, on `port` (tests and benchmarks start servers with it)."""
    return [sys.executable, str(ROOT / "serve.py"), "--server.port", str(port), *options]


def wait_healthy(url: str, proc, timeout: float = 300.0, log_tail=None) -> None:
    """Wait until a server started with `command()` answers its health check (a booth opens its port only
    once warm). RuntimeError when the process exits first (with `log_tail()` when given), TimeoutError at
    the deadline. Tests and bench/ use it, so every started server is waited for the same way."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = f":\n{log_tail()}" if log_tail else ""
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering{tail}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer its health check within {timeout:.0f} s")


def close_pages_directory_routing() -> None:
    """Turn Streamlit's multipage-v1 routing off for this process, before its first session."""
    from streamlit.runtime.pages_manager import PagesManager

    if not hasattr(PagesManager, "uses_pages_directory"):  # checked with 1.67; fail loudly if it moves
        raise RuntimeError("streamlit's PagesManager.uses_pages_directory is gone: check serve.py's routing fix")
    PagesManager.uses_pages_directory = False


def listen_address(options: list[str]) -> tuple[list[str], str]:
    """Streamlit's options with `--server.address` added (DLGUIDE_ADDRESS, default 127.0.0.1) unless the user
    gave one, and the address served. Two are refused (ServingRefused): which one binds is Streamlit's choice, and
    a second `--server.address 0.0.0.0` once opened the app to the network past every check (issue 33, N13)."""
    from dlguide_core.network import ServingRefused

    given = [o for o in options if o == "--server.address" or o.startswith("--server.address=")]
    if len(given) > 1:
        raise ServingRefused("--server.address is given more than once: give it once (or set DLGUIDE_ADDRESS)")
    for index, option in enumerate(options):
        if option == "--server.address" and index + 1 < len(options):
            return options, options[index + 1]
        if option.startswith("--server.address="):
            return options, option.partition("=")[2]
    from dlguide_core.network import configured_address

    address = configured_address()
    return [*options, "--server.address", address], address


def warm_booth() -> None:
    """Fill the booth page's caches (model, backend, attract view) in this process, before visitors come.

    Runs on the main thread before the server starts, so no Streamlit call happens off the script
    threads and no visitor ever sees a half-prepared booth. A failure is printed and left to the page,
    which shows its own one-line error and retries on the next visit.
    """
    import logging

    from dlguide_core.booth import booth_weights
    from dlguide_core.errors import DlguideError
    from ui.cache import attract_items, booth_predictor, get_model

    # The cached functions' spinners have no session to draw in yet: Streamlit says so once per call.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    start = time.perf_counter()
    say("preparing the booth before opening the port (model, backend, attract view)…")
    try:
        loaded = get_model(booth_weights(fetch=True, say=say))
        predictor = booth_predictor(loaded)
        attract_items(loaded, predictor)
    except DlguideError as exc:
        say(f"the booth could not be prepared ({exc}); the page will say so to visitors")
        return
    say(f"booth ready in {time.perf_counter() - start:.1f} s: {predictor.backend} on {predictor.device}")


def warm_app() -> None:
    """Load what the first visit of the full app needs, in this process, before visitors come: the pages'
    helper modules (torch and torchvision with them), the device probe behind the sidebar's device label
    (its first run imports ONNX Runtime and looks for MIGraphX; later runs are instant) and the default weights,
    into the cache entry the Classify page reads. Only weights already on disk are loaded: the page offers the
    ImageNet download itself."""
    import importlib
    import logging
    import pkgutil

    import ui
    from dlguide_core import devices
    from dlguide_core.errors import DlguideError

    for name in ("scriptrunner_utils.script_run_context", "caching.cache_data_api"):  # no session yet: said once
        logging.getLogger(f"streamlit.runtime.{name}").setLevel(logging.ERROR)
    start = time.perf_counter()
    say("preparing the app before opening the port (imports, device probe, default model)…")
    for module in pkgutil.iter_modules(ui.__path__):
        importlib.import_module(f"ui.{module.name}")
    from dlguide_core.vision.models import available_weights, imagenet_weights_path
    from ui.cache import get_model

    devices.collect(include_tensorflow=False)  # as the sidebar asks (ui.cache.device_report's default)
    default = available_weights()[0]
    if default != "imagenet" or imagenet_weights_path().is_file():
        try:
            get_model(default)
        except DlguideError as exc:
            say(f"the default weights could not be loaded ({exc}); the Classify page will say so")
    say(f"app ready in {time.perf_counter() - start:.1f} s")


def give_back_freed_memory() -> None:
    """Return to the system what the warm-up allocated and freed (the booth times several backends and keeps one;
    the losers' buffers stay in glibc's heaps until trimmed), so the server starts serving from its working
    set. glibc only (malloc_trim); elsewhere nothing to do."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator returns memory its own way
        return
    if trim is not None:
        trim(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve dlguide (streamlit run app.py, routed by app.py only).",
                                     epilog="Other options go to `streamlit run` (see `streamlit run --help`).")
    parser.add_argument("--no-warm", action="store_true",
                        help="open the port at once: the first visit loads the model (and prepares the booth)")
    ours, streamlit_options = parser.parse_known_args(argv)
    sys.path.insert(0, str(ROOT))  # dlguide_core and ui, as `streamlit run` puts app.py's folder first
    from dlguide_core import threads

    threads.declare("server")  # before torch loads OpenMP: a server beside training jobs never spins
    from dlguide_core.jobs.store_url import absolute_environment

    absolute_environment()  # a relative DLGUIDE_STORE_URL means the directory the server was started in
    from dlguide_core.network import ServingRefused, allowed_hosts

    try:
        streamlit_options, address = listen_address(streamlit_options)
        hosts = allowed_hosts(address)
    except ServingRefused as exc:
        say(f"not starting: {exc}")
        raise SystemExit(2) from None
    close_pages_directory_routing()
    from dlguide_core import settings
    from web.stack import bound_sessions, install_middleware
    from web.token_gate import TokenRefused, load_token

    try:  # the booth is public and read-only: no token
        token = None if settings.booth_mode() else load_token().value  # an unusable DLGUIDE_HOME: one line
    except TokenRefused as exc:
        say(f"not starting: {exc}")
        raise SystemExit(2) from None
    install_middleware(hosts, address, token)
    bound_sessions()

    if not ours.no_warm:
        if settings.booth_mode():
            warm_booth()
        else:
            warm_app()
        give_back_freed_memory()
        # The model, torch and the backends are now millions of objects that live as long as the process: out of
        # the collector's sight, Streamlit's full collection after every script run costs no longer scans them
        # (it took ~1 s of CPU per booth classification under the GIL: issue 30's profile).
        gc.freeze()
    from streamlit.web import cli

    cli.main(["run", str(APP), *streamlit_options], prog_name="streamlit")


if __name__ == "__main__":
    main()
