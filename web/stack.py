"""The middleware stack serve.py installs in Streamlit's server, and the bounds on what one browser session may
cost it. serve.py is the launcher (its argv, address, warm-up and main); what stands between a request and Streamlit
is assembled here, in the order a request meets it: the Host check, the Origin check (web.origin_check, the full app
and the booth alike), the token gate (or the return after sign-in),
the upload gate, the booth's route, the compressed static files, then Streamlit's own middleware.
"""

from __future__ import annotations

import sys


def say(message: str) -> None:
    print(f"dlguide: {message}", file=sys.stderr, flush=True)


def install_middleware(hosts: list[str], address: str, token: str | None = None) -> None:
    """Put Starlette's TrustedHostMiddleware in front of Streamlit's own middleware: a request whose Host is
    not in `hosts` gets 400 on every route, /_stcore/stream's websocket upgrade included. Behind it,
    web.static_gzip sends Streamlit's scripts and styles compressed (Streamlit 1.67 sends them raw), and
    web.booth_api answers the booth page's photos over plain HTTP (POST …/_booth/classify and …/_booth/heatmap:
    no script run per photo; behind the token gate in the full app, public with the booth).

    Streamlit 1.67 builds its ASGI app in starlette_app.create_starlette_app from the module-level
    create_streamlit_middleware(); that is replaced here, before the server starts. Once the middleware is
    built (the config and secrets loaded), a network address without sign-in is warned about on stderr.

    With `token` (the full app; not the booth), web.token_gate stands right behind the host check unless sign-in
    ([auth]) is configured: no page, upload or websocket without the token (issue 33, N1)."""
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from streamlit import config, file_util
    from streamlit.web.server.starlette import starlette_app, starlette_server

    from dlguide_core.network import is_loopback
    from ui.auth import sign_in_configured  # what app.py's gate reads: Streamlit's secrets, [auth]
    from web.booth_api import BoothApi
    from web.origin_check import OriginCheck
    from web.page_base import PageBase
    from web.sign_in_return import ReturnAfterSignIn
    from web.static_gzip import GzipStatic
    from web.upload_caps import UploadGate

    build = getattr(starlette_app, "create_streamlit_middleware", None)
    factory = getattr(starlette_app, "create_starlette_app", None)
    served_by = getattr(getattr(starlette_server, "UvicornServer", None), "start", None)
    if (build is None or factory is None or served_by is None  # checked with 1.67; fail loudly if it moves
            or "create_streamlit_middleware" not in factory.__code__.co_names
            or "create_starlette_app" not in served_by.__code__.co_names):
        raise RuntimeError("streamlit's starlette app factory moved: check serve.py's host allow-list")

    def guarded_middleware() -> list:
        if not is_loopback(address) and not sign_in_configured():
            say(f"WARNING: serving to a network ({address or 'every interface'}) with no sign-in: anyone who "
                f"reaches it can use every page. Add an [auth] section to .streamlit/secrets.toml (README: "
                f"Serving to a team).")
        base_url = config.get_option("server.baseUrlPath") or ""
        signed = sign_in_configured()
        gate = ([Middleware(ReturnAfterSignIn, base_url=base_url)] if signed else  # issue 31, item 8
                [] if token is None else [token_gate(token, address, hosts)])
        return [Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
                Middleware(OriginCheck),  # no websocket nor POST/PUT from another port's page (issue 43, P1)
                *gate,
                Middleware(UploadGate, base_url=base_url),  # uploads received a few at a time (issue 33, N4)
                Middleware(BoothApi, base_url=base_url),  # the booth's photos, answered without a script run (issue 30)
                Middleware(PageBase, base_url=base_url),  # the page names its server: no 404 probes (issue 43)
                Middleware(GzipStatic, static_dir=file_util.get_static_dir(),  # its scripts compressed (issue 18)
                           base_url=config.get_option("server.baseUrlPath") or ""),
                *build()]

    starlette_app.create_streamlit_middleware = guarded_middleware


def token_gate(token: str, address: str, hosts: list[str]):
    """web.token_gate's middleware for this server, and Streamlit's welcome line replaced by the address that lets
    a browser in (printed once the port is open, as Jupyter prints its token URL)."""
    from starlette.middleware import Middleware
    from streamlit import config
    from streamlit.web import bootstrap

    from dlguide_core.network import is_loopback
    from web.token_gate import TokenGate, entry_url

    port = int(config.get_option("server.port"))
    base_path = (config.get_option("server.baseUrlPath") or "").strip("/")
    named = next((h for h in hosts if "*" not in h), "127.0.0.1")
    host = ("127.0.0.1" if address.strip() in ("", "0.0.0.0", "::") or is_loopback(address) else named)
    base = f"http://{host}:{port}" + (f"/{base_path}" if base_path else "")
    if not hasattr(bootstrap, "_print_url"):  # checked with 1.67; fail loudly if it moves
        raise RuntimeError("streamlit's bootstrap._print_url moved: check serve.py's token address")

    def print_entry(is_running_hello: bool) -> None:
        say(f"open {entry_url(base, token)} (the token keeps other users of this machine out; README: "
            f"Serving to a team)")

    bootstrap._print_url = print_entry
    return Middleware(TokenGate, token=token, port=port, base_url=base_path)


def bound_sessions() -> None:
    """What one browser session may cost the server (issue 33, N2-N4): its control messages pass
    web.control_messages (no cache clearing, reruns on a budget), and its uploads are kept by web.upload_caps'
    store (caps per session and server, unclaimed files dropped) instead of Streamlit's plain one."""
    from streamlit.runtime import Runtime
    from streamlit.web.server import server

    from web import control_messages
    from web.upload_caps import CappedUploads

    if not hasattr(server, "MemoryUploadedFileManager"):  # checked with 1.67; fail loudly if it moves
        raise RuntimeError("streamlit's server no longer makes MemoryUploadedFileManager: check serve.py")
    server.MemoryUploadedFileManager = CappedUploads  # type: ignore[misc]
    control_messages.install(Runtime)
