"""`open_app()`: the whole app under streamlit.testing, as a user reaches it via app.py's navigation."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_app(page: str | None = None, timeout: float = 120) -> AppTest:
    """Run app.py; with `page` (e.g. "pages/devices.py") switch to it and run again."""
    at = AppTest.from_file(APP, default_timeout=timeout).run()
    if page:
        at.switch_page(page).run()
    return at
