"""serve.py's pieces in this process (issue 22): the listen address it passes on, the Host guard it puts in
front of Streamlit's middleware, and the start-up warning for a network served without sign-in."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.middleware.trustedhost import TrustedHostMiddleware
from streamlit import config
from streamlit.runtime.secrets import secrets_singleton
from streamlit.web.server.starlette import starlette_app

import serve
from web.stack import install_middleware


@pytest.mark.parametrize("options, env, address, added", [
    ([], None, "127.0.0.1", True),
    ([], "10.1.2.3", "10.1.2.3", True),
    (["--server.address", "0.0.0.0", "--server.port", "1"], "10.1.2.3", "0.0.0.0", False),
    (["--server.address=::1"], None, "::1", False),
])
def test_listen_address(monkeypatch, options, env, address, added) -> None:
    if env is None:
        monkeypatch.delenv("DLGUIDE_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("DLGUIDE_ADDRESS", env)
    served_options, served = serve.listen_address(options)
    assert served == address
    assert served_options == ([*options, "--server.address", address] if added else options)


@pytest.fixture
def secrets_file(tmp_path: Path, monkeypatch):
    """Point Streamlit's secrets at a file of the test's (None: no secrets); restored afterwards."""
    saved = config.get_option("secrets.files")
    monkeypatch.setattr(starlette_app, "create_streamlit_middleware", starlette_app.create_streamlit_middleware)

    def use(text: str | None) -> None:
        path = tmp_path / "secrets.toml"
        if text is not None:
            path.write_text(text)
        config.set_option("secrets.files", [str(path)])
        secrets_singleton._reset()

    yield use
    config.set_option("secrets.files", saved)
    secrets_singleton._reset()


AUTH = '[auth]\nredirect_uri = "http://localhost:1/oauth2callback"\ncookie_secret = "x"\nclient_id = "a"\n'


@pytest.mark.parametrize("address, secrets, warned", [
    ("0.0.0.0", None, True), ("192.0.2.1", '[other]\nkey = "v"\n', True), ("0.0.0.0", AUTH, False),
    ("127.0.0.1", None, False),
])
def test_the_host_guard_comes_first_and_a_bare_network_is_warned(secrets_file, capsys, address, secrets,
                                                                  warned) -> None:
    secrets_file(secrets)
    install_middleware(["gpu1.lab.example", "[::1]"], address)
    stack = starlette_app.create_streamlit_middleware()
    assert stack[0].cls is TrustedHostMiddleware
    assert stack[0].kwargs["allowed_hosts"] == ["gpu1.lab.example", "[::1]"]
    assert len(stack) > 1  # Streamlit's own middleware follows
    err = capsys.readouterr().err
    assert ("with no sign-in" in err) is warned, err
