"""Issue 43 P4 residual: a DLGUIDE_STORE_URL that is not a URL (an upper-case `?PASSWORD=`, a libpq keyword string)
crashed three pages with a traceback; every page now runs, and what it says holds no password."""

from __future__ import annotations

import pytest

from tests.support.apptest import open_app

SECRET = "sekr1t"
PAGES = ("pages/classify.py", "pages/devices.py", "pages/train.py", "pages/compiled.py")


@pytest.mark.parametrize("url", [f"postgresql://u@127.0.0.1:9/jobs?PASSWORD={SECRET}",
                                 f"host=127.0.0.1 user=u password={SECRET} dbname=jobs"])
def test_every_page_runs_with_a_store_url_that_is_not_a_url(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLGUIDE_STORE_URL", url)
    for page in PAGES:
        at = open_app(page)
        assert not at.exception, (page, at.exception)
        shown = " ".join(str(e.value) for e in [*at.error, *at.warning, *at.info, *at.markdown, *at.caption])
        assert SECRET not in shown, page
    errors = [e.value for e in open_app("pages/train.py").error]
    assert any("DLGUIDE_STORE_URL=" in e for e in errors), errors
