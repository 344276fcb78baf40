"""Serve dlguide: the one way the app starts (`make run`, `make kiosk`, `make dev`, the Dockerfile, tests, bench/).

    python serve.py [--no-warm] [streamlit run options, e.g. --server.port 8501]

It runs `streamlit run app.py` in this process, after two things `streamlit run` alone gets wrong here:

1. One router from the first second. Streamlit 1.67 routes a `pages/` folder beside the entry script by
   file name ("multipage v1": every file of pages/, helpers included, becomes a page and app.py is
   bypassed) until some session of the process calls st.navigation. The switch is a class attribute,
   `PagesManager.uses_pages_directory`, set from "is there a pages/ folder?" only while it is still None;
   setting it to False before the server starts leaves app.py's st.navigation the only router.
2. A warm booth. With DLGUIDE_KIOSK=1 the booth's model, backend (ONNX export and session, or a MIGraphX
   compile) and attract view are prepared before the server opens its port, into the same
   st.cache_resource entries the booth page reads, so the first visitor gets an answer, not a spinner.
   The ImageNet weights are checked first (downloaded when online, as the app and the CLI do).

The served configuration is .streamlit/config.toml (file watcher off); `make dev` adds live reload.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from pathlib import Path

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


def say(message: str) -> None:
    print(f"dlguide: {message}", file=sys.stderr, flush=True)


def booth_weights() -> str:
    """The booth's weights: ImageNet when cached or downloadable now, else the untrained model (the page says so)."""
    from dlguide_core.errors import WeightsUnavailable
    from dlguide_core.vision.models import fetch_imagenet_weights, imagenet_weights_path

    if imagenet_weights_path().is_file():
        return "imagenet"
    say(f"the ImageNet weights are not cached at {imagenet_weights_path()}: downloading them")
    try:
        fetch_imagenet_weights()
        return "imagenet"
    except WeightsUnavailable as exc:
        say(f"{exc} The booth runs untrained until then.")
        return "none"


def warm_booth() -> None:
    """Fill the booth page's caches (model, backend, attract view) in this process, before visitors come.

    Runs on the main thread before the server starts, so no Streamlit call happens off the script
    threads and no visitor ever sees a half-prepared booth. A failure is printed and left to the page,
    which shows its own one-line error and retries on the next visit.
    """
    import logging

    from dlguide_core.errors import DlguideError
    from ui.cache import attract_items, get_model, kiosk_runner

    # The cached functions' spinners have no session to draw in yet: Streamlit says so once per call.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    start = time.perf_counter()
    say("preparing the booth before opening the port (model, backend, attract view)…")
    try:
        loaded = get_model(booth_weights())
        runner = kiosk_runner(loaded)
        attract_items(loaded, runner)
    except DlguideError as exc:
        say(f"the booth could not be prepared ({exc}); the page will say so to visitors")
        return
    say(f"booth ready in {time.perf_counter() - start:.1f} s: {runner.backend} on {runner.device}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve dlguide (streamlit run app.py, routed by app.py only).",
                                     epilog="Other options go to `streamlit run` (see `streamlit run --help`).")
    parser.add_argument("--no-warm", action="store_true",
                        help="booth mode: open the port at once and prepare the booth on its first visit")
    ours, streamlit_options = parser.parse_known_args(argv)
    sys.path.insert(0, str(ROOT))  # ui.cache for the warm-up, as `streamlit run` puts app.py's folder first
    close_pages_directory_routing()
    from dlguide_core import settings

    if settings.kiosk_mode() and not ours.no_warm:
        warm_booth()
    from streamlit.web import cli

    cli.main(["run", str(APP), *streamlit_options], prog_name="streamlit")


if __name__ == "__main__":
    main()
