"""Streamlit's scripts sent compressed (web/static_gzip.py, issue 18): the bytes a browser unpacks are the file's,
and nothing else changes hands: other clients, other files, ranges and paths out of the folder go to Streamlit."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from web.static_gzip import GzipStatic

SCRIPT = b"export const answer = 42;\n" * 400


def streamlit_stand_in(request) -> PlainTextResponse:
    return PlainTextResponse(f"streamlit:{request.url.path}")


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    (tmp_path / "static" / "js").mkdir(parents=True)
    (tmp_path / "static" / "js" / "index.abc.js").write_bytes(SCRIPT)
    (tmp_path / "static" / "media").mkdir()
    (tmp_path / "static" / "media" / "font.woff2").write_bytes(b"\0" * 4000)
    (tmp_path / "secret.js").write_bytes(b"outside the static folder")
    app = Starlette(routes=[Route("/{path:path}", streamlit_stand_in)])
    return TestClient(GzipStatic(app, static_dir=tmp_path))


def test_a_script_is_sent_compressed_and_unpacks_to_the_file(client: TestClient) -> None:
    response = client.get("/static/js/index.abc.js", headers={"Accept-Encoding": "gzip, deflate, br"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == SCRIPT  # httpx unpacks it
    assert int(response.headers["content-length"]) < len(SCRIPT) / 10
    assert response.headers["content-type"].startswith(("application/javascript", "text/javascript"))
    assert response.headers["cache-control"] == "public, immutable, max-age=31536000"
    assert response.headers["vary"] == "Accept-Encoding"
    again = client.get("/static/js/index.abc.js", headers={"Accept-Encoding": "gzip",
                                                           "If-None-Match": response.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize(("path", "headers"), [
    ("/static/js/index.abc.js", {"Accept-Encoding": "identity"}),
    ("/static/js/index.abc.js", {"Accept-Encoding": "gzip;q=0, br"}),
    ("/static/js/index.abc.js", {"Accept-Encoding": "gzip", "Range": "bytes=0-9"}),
    ("/static/media/font.woff2", {"Accept-Encoding": "gzip"}),  # compressed already
    ("/static/js/missing.js", {"Accept-Encoding": "gzip"}),
    ("/static/../secret.js", {"Accept-Encoding": "gzip"}),
    ("/static/js/../../secret.js", {"Accept-Encoding": "gzip"}),
    ("/static//js/index.abc.js", {"Accept-Encoding": "gzip"}),
    ("/secret.js", {"Accept-Encoding": "gzip"}),
])
def test_everything_else_goes_to_streamlit_unchanged(client: TestClient, path: str, headers: dict) -> None:
    response = client.get(path, headers=headers)
    assert "content-encoding" not in response.headers
    assert response.text.startswith("streamlit:")


def test_under_a_base_url_path(tmp_path: Path) -> None:
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "app.css").write_bytes(b"body{margin:0}" * 200)
    app = Starlette(routes=[Route("/{path:path}", streamlit_stand_in)])
    client = TestClient(GzipStatic(app, static_dir=tmp_path, base_url="/lab/"))
    response = client.get("/lab/static/app.css", headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == b"body{margin:0}" * 200
    assert "content-encoding" not in client.get("/static/app.css", headers={"Accept-Encoding": "gzip"}).headers


@pytest.mark.parametrize("path", ["/static/../secret.js", "/static/js/../../secret.js", "/static/js/./index.abc.js",
                                  "/static/js\\index.abc.js", "/static/js/index.abc.js\x00", "/static/"])
def test_no_request_path_leaves_the_static_folder(client: TestClient, tmp_path: Path, path: str) -> None:
    from web.static_gzip import static_file

    assert static_file(tmp_path, path, "/static/") is None
