"""The booth's Teach routes (issue 44), dispatched by web/booth_api.py's BoothApi with its XSRF check, body reading,
size cap and slots:

    POST {base}/_booth/teach?name=NAME   body: a photo; header X-Booth-Visitor
        200 {"name", "examples", "names": {NAME: count, ...}}
    POST {base}/_booth/learn             header X-Booth-Visitor
        200 {"names": [...], "examples", "learn_ms", "train_ms", "loss": [...], "steps", "device", "backend"}
    POST {base}/_booth/forget            header X-Booth-Visitor
        200 {"forgotten": true, "names": {}}
    POST {base}/_booth/classify          with X-Booth-Visitor: every `top` row carries "taught": true/false

Errors as the booth's others ({"error": "one line"}): 400 a bad visitor id, name or photo, too few names or photos to
learn; 403 no XSRF token, or another screen's visitor id; 409 over a cap (names, photos per name); 413 too large;
429 the visitor's previous teach or learn is still being worked on; 503 the model could not answer. The state
itself lives in dlguide_core.booth_teach (memory only).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from dlguide_core.booth_teach import TeachRefused, TeachStore, check_visitor, owner_token

if TYPE_CHECKING:
    from dlguide_core.teach import TaughtHead
    from web.booth_api import BoothApi

TEACH_ROUTES = ("teach", "learn", "forget")
VISITOR_HEADER = b"x-booth-visitor"
VISITOR_KEY, OWNER_KEY = "\0visitor", "\0owner"  # BoothApi.answer's query carries them (never from the URL)
STORE = TeachStore()  # one booth model per server process: every visitor's taught names


def visitor_fields(scope) -> dict[str, str]:
    """The request's visitor id (its header, "" when absent) and owner token, for BoothApi.answer's query; they
    replace anything the URL's query had under those keys."""
    headers = dict(scope.get("headers") or [])
    visitor = headers.get(VISITOR_HEADER, b"").decode("latin-1")
    return {VISITOR_KEY: visitor, OWNER_KEY: owner_of(scope)}


def owner_of(scope) -> str:
    """The screen a visitor id is bound to: its XSRF cookie (one per browser profile), else its address."""
    from starlette.requests import Request
    from streamlit.web.server.starlette.starlette_server_config import XSRF_COOKIE_NAME

    cookie = Request(scope).cookies.get(XSRF_COOKIE_NAME)
    if cookie:
        return owner_token("xsrf:" + cookie)
    client = scope.get("client") or ("", 0)
    return owner_token(f"addr:{client[0]}")


def head_for(query: dict[str, str]) -> tuple[bool, TaughtHead | None]:
    """For /_booth/classify: whether the request came from a Teach visitor (then its rows say "taught"), and that
    visitor's head (None before Learn). TeachRefused for a malformed or another screen's id."""
    raw = query.get(VISITOR_KEY, "")
    if not raw:
        return False, None
    return True, STORE.head(check_visitor(raw), query.get(OWNER_KEY, ""))


async def dispatch(api: BoothApi, route: str, scope, receive, query: dict[str, str]) -> tuple[bytes, str]:
    """A teach route's answer (JSON bytes and content type); ApiError for every refusal."""
    from web.booth_api import ApiError

    fields = visitor_fields(scope)
    try:
        visitor = check_visitor(fields[VISITOR_KEY])
    except TeachRefused as exc:
        raise ApiError(exc.status, str(exc)) from None
    data = await api.receive_body(scope, receive) if route == "teach" else await drain(receive)
    async with api.slot(scope):
        return await asyncio.get_running_loop().run_in_executor(
            api.pool, work, api, route, visitor, fields[OWNER_KEY], data, query)


async def drain(receive) -> bytes:
    """learn and forget take no body: whatever came is read and dropped (at most a few bytes are expected)."""
    from web.booth_api import ApiError

    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ApiError(400, "the request did not arrive whole")
        total += len(message.get("body", b""))
        if total > 4096:
            raise ApiError(413, "this route takes no body")
        if not message.get("more_body", False):
            return b""


def work(api: BoothApi, route: str, visitor: str, owner: str, data: bytes, query: dict[str, str]) -> tuple[bytes, str]:
    """On a request thread: the store's answer, errors mapped to the booth's statuses."""
    from dlguide_core.errors import DlguideError, ImageError, UsageError, error_summary
    from web.booth_api import LOG, ApiError, photo_name

    try:
        if route == "forget":
            return json.dumps(STORE.forget(visitor, owner)).encode(), "application/json"
        loaded, predictor = api.served()
        if route == "teach":
            answer: object = STORE.teach_photo(loaded, predictor, visitor, owner, query.get("name", ""), data,
                                               photo_name(query.get("name", "")))
        else:
            answer = STORE.learn(loaded, predictor, visitor, owner)
        return json.dumps(answer).encode(), "application/json"
    except TeachRefused as exc:
        raise ApiError(exc.status, str(exc)) from None
    except (ImageError, UsageError) as exc:
        raise ApiError(400, str(exc)) from None
    except DlguideError as exc:
        raise ApiError(503, str(exc)) from None
    except Exception as exc:  # one line for the visitor; the traceback (no photo in it) in the server's log
        LOG.exception("booth %s failed", route)
        raise ApiError(503, f"the booth could not answer ({error_summary(exc)}); please try again") from None
