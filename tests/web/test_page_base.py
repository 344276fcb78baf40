"""A page load makes no failing request (issue 43's walk: two 404s in the console on every page load): Streamlit's
page names its server (web.page_base), so the frontend no longer probes /<page>/_stcore/health and host-config."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import serve
from tests.support.own_loop import run_in_own_loop
from tests.support.servers import start_served
from web.page_base import MODULE_TAG, PageBase, base_script, with_base_script
from web.token_gate import entry_url

PAGE = b"<html><head><script>window.prerenderReady = false</script>\n" + MODULE_TAG + b' src="./x.js"></script>'


def test_the_script_names_the_server_root_or_its_base_path():
    assert b'location.origin + "/"}' in base_script("")
    assert b'location.origin + "/lab/"}' in base_script("/lab/") and base_script("lab") == base_script("/lab")
    assert b"window.__streamlit || {" in base_script("")  # a host page's own configuration is kept
    edited = with_base_script(PAGE, b"<S>")
    assert edited is not None and edited.index(b"<S>") + 3 == edited.index(MODULE_TAG)
    assert with_base_script(b"<html><body>a refusal</body></html>", b"<S>") is None


def _serve(app, path: str, accept_gzip: bool = False) -> tuple[dict, bytes]:
    """One GET through `app` (an ASGI app): the response's start message (headers as a dict) and its body."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"host", b"127.0.0.1")] + ([(b"accept-encoding", b"gzip, br")] if accept_gzip else [])
    run_in_own_loop(lambda: app({"type": "http", "method": "GET", "path": path, "headers": headers}, receive, send))
    start = {**sent[0], "headers": {k.decode(): v.decode() for k, v in sent[0]["headers"]}}
    return start, b"".join(m.get("body", b"") for m in sent[1:])


def _streamlit_like(seen: list[list]):
    """A stand-in for Streamlit: its page in two chunks for page paths, plain text elsewhere; what it was asked."""
    async def app(scope, receive, send) -> None:
        seen.append(scope["headers"])
        page = not scope["path"].startswith("/_stcore/")
        kind = b"text/html; charset=utf-8" if page else b"text/plain"
        body = PAGE if page else b"ok"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                                (b"etag", b'"v1"')]})
        await send({"type": "http.response.body", "body": body[:10], "more_body": True})
        await send({"type": "http.response.body", "body": body[10:]})
    return app


@pytest.mark.parametrize("accept_gzip", [False, True])
def test_the_page_gets_the_script_and_everything_else_passes(accept_gzip: bool):
    seen: list[list] = []
    app = PageBase(_streamlit_like(seen))
    start, body = _serve(app, "/train", accept_gzip)
    if accept_gzip:
        assert start["headers"]["content-encoding"] == "gzip"
        body = gzip.decompress(body)
    assert body == with_base_script(PAGE, base_script("")) and int(start["headers"]["content-length"]) > len(PAGE)
    assert start["headers"]["etag"] == '"v1"' and start["headers"]["vary"] == "Accept-Encoding"
    assert all(name != b"accept-encoding" for name, _ in seen[-1])  # asked for the page uncompressed, to read it
    start, body = _serve(app, "/_stcore/health", accept_gzip)
    assert body == b"ok" and "content-encoding" not in start["headers"]
    assert any(name == b"accept-encoding" for name, _ in seen[-1]) == accept_gzip  # not a page: untouched


def _two_visitors(browser, root: str, token: str) -> tuple[list[tuple[int, str]], list[str]]:
    """Two visitors at once: each opens a page by its address, goes to the other by the sidebar and reloads it.
    The responses of 400 or more and the console errors they met."""
    failed: list[tuple[int, str]] = []
    errors: list[str] = []
    visitors = [browser.new_context() for _ in range(2)]
    try:
        pages = [context.new_page() for context in visitors]
        for page in pages:
            page.on("response", lambda r: r.status >= 400 and failed.append((r.status, r.url)))
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        for page, (first, heading) in zip(pages, [("/devices", "Devices"), ("/train", "Train")], strict=True):
            page.goto(entry_url(root, token, first))
            page.get_by_role("heading", name=heading).first.wait_for(timeout=120_000)
        for page, (then, path) in zip(pages, [("Train", "/train"), ("Devices", "/devices")], strict=True):
            page.get_by_role("link", name=then).first.click()
            page.get_by_role("heading", name=then).first.wait_for(timeout=120_000)
            assert page.url.split("?")[0] == root + path  # the page's own address, the base path kept
            page.reload()
            page.get_by_role("heading", name=then).first.wait_for(timeout=120_000)
        pages[0].wait_for_timeout(2000)  # any late probe
    finally:
        for context in visitors:
            context.close()
    return failed, errors


@pytest.mark.parametrize("base", ["", "lab"])
def test_served_pages_load_without_a_failing_request(browser, tmp_path: Path, base: str):
    """The app as `make run` serves it, at the root and under a base path (server.baseUrlPath): no response of
    400 or more and no console error, and each page drawn (its websocket found the server)."""
    served = start_served(tmp_path / "serve.log", options=(f"--server.baseUrlPath={base}",) if base else (),
                          wait=False)
    root = served.url + (f"/{base}" if base else "")
    try:
        serve.wait_healthy(root, served.proc, log_tail=lambda: served.log_text()[-2000:])
        failed, errors = _two_visitors(browser, root, served.url.token)
    finally:
        served.stop()
    assert failed == [] and errors == [], (failed, errors)
