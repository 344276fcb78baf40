"""The booth's photo answers over plain HTTP (issue 30): a visitor's photo goes from the browser to the model and back
without a Streamlit script run.

Under a crowd the server's CPU per classification was Streamlit's, not the model's: each photo cost the visitor's
screen two script runs (the answer, then "Start over"), a new script thread each, and every element they drew was a
message the server's Python built and sent (about 1 ms apiece under the GIL). Here a photo costs one HTTP request:
its bytes in, decode and preprocess on the image threads, the forward in the booth's batching worker (with every
other visitor's photo of the moment), top-5 out as JSON. The visitor's screen (ui/booth_screen.js) draws the answer,
the photo and what the model saw itself, and keeps the attract view, "Start over" and the idle reset in the browser.

    POST {base}/_booth/classify[?name=photo.jpg]        body: the photo's bytes
        200 application/json  booth_photos.answer_json's keys (README, "Booth mode")
    POST {base}/_booth/heatmap?index=N[&name=...]       body: the same photo's bytes
        200 image/jpeg        the Grad-CAM of class N over what the model saw
    anything else under {base}/_booth/                  404; a method other than POST: 405
    every error                                         {"error": "one line"}: 400 a bad photo or request,
                                                        403 no XSRF token, 408 the body came too slowly, 413 too
                                                        large, 429 too many at once from one address, 503 the model
                                                        could not answer (another origin's page: 403, plain text)

The same XSRF double-submit check as Streamlit's own uploads (the `_streamlit_xsrf` cookie and an `X-Xsrftoken`
header; on unless server.enableXsrfProtection is off), the same size cap (server.maxUploadSize, at most
vision.images.MAX_FILE_BYTES). A body is read whole first, on a deadline and at a minimum rate (web.bodies: a
stalled one gets 408 and holds no turn), then at most INFLIGHT_BATCHES batches' worth of requests are worked on at
once, and DLGUIDE_CLIENT_SLOTS of one client address (the others wait, behind their own address's). Nothing is
kept after the answer: no photo, no file, no log line with a visitor's data. serve.py puts `BoothApi` in every
server's middleware (the full app has a Booth page too), behind the host and Origin checks and, in the full app,
the token gate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from ui.booth import upload_cap
from web import booth_teach
from web.bodies import BodyRefused, ClientSlots, read_body

if TYPE_CHECKING:
    from dlguide_core.booth import Predictor
    from dlguide_core.vision.models import LoadedModel

# Requests received and worked on at once, in batches' worth (DLGUIDE_MAX_BATCH): the batch running and the next one
# forming; the rest wait unread, holding nothing (a request in the work holds its photo's bytes, image and row).
INFLIGHT_BATCHES = 2
NAME_CHARS = 80  # a photo's name is only ever quoted in an error line
INDEX_DIGITS = 6  # a class index: no model here has a million classes (5,000 digits cost int() its time)
ROUTES = ("classify", "heatmap", "teach", "learn", "forget")  # the last three: web/booth_teach.py (issue 44)
LOG = logging.getLogger("dlguide.booth_api")

Served = Callable[[], "tuple[LoadedModel, Predictor]"]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def served_booth() -> tuple[LoadedModel, Predictor]:
    """The booth page's own model and predictor (ui.cache, warmed by serve.py): one worker batches every visitor."""
    from dlguide_core import booth
    from ui.cache import booth_predictor, get_model

    loaded = get_model(booth.booth_weights())
    return loaded, booth_predictor(loaded)


class BoothApi:
    """Pure ASGI middleware: the booth's routes under `{base_url}/_booth/`; every other request passes through."""

    def __init__(self, app, base_url: str = "", served: Served = served_booth, inflight: int | None = None,
                 max_bytes: int | None = None) -> None:
        from dlguide_core import settings

        inflight = inflight or INFLIGHT_BATCHES * settings.max_batch(on_gpu=True)  # the larger default
        self.app, self.served = app, served
        base = base_url.strip("/")
        self.prefix = f"/{base}/_booth/" if base else "/_booth/"
        self.turns = asyncio.Semaphore(inflight)
        self.slots = ClientSlots()  # per client address: bodies under way, and turns (issue 43, P2 and P5)
        # The threads that wait on a request's work (the image threads and the worker do it), one per request in the
        # work: the executor starts them as they are first needed and keeps them.
        self.pool = ThreadPoolExecutor(max_workers=inflight, thread_name_prefix="booth-request")
        self.max_bytes = max_bytes
        # ui.cache's functions log "no session" once per call when called outside a script run, as here
        logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        try:
            route = path[len(self.prefix):]
            if route not in ROUTES:
                raise ApiError(404, f"no such booth route: {route[:40]!r}")
            if scope.get("method") != "POST":
                raise ApiError(405, "the booth's routes take a photo by POST")
            check_xsrf(scope)
            query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
            query.update(booth_teach.visitor_fields(scope))  # the Teach tab's visitor (header), never the URL's
            if route in booth_teach.TEACH_ROUTES:
                body, content_type = await booth_teach.dispatch(self, route, scope, receive, query)
                await respond(send, 200, body, content_type)
                return
            data = await self.receive_body(scope, receive)  # before any slot: a slow body holds none (issue 43)
            async with self.slot(scope):
                body, content_type = await asyncio.get_running_loop().run_in_executor(
                    self.pool, self.answer, route, data, query)
            await respond(send, 200, body, content_type)
        except ApiError as exc:
            await respond(send, exc.status, json.dumps({"error": str(exc)}).encode(), "application/json",
                          close=exc.status == 408)

    async def receive_body(self, scope, receive, what: str = "the photo") -> bytes:
        """The request's body, read whole (web.bodies: a deadline, a minimum rate, this route's size cap) before
        it takes a slot; at most CLIENT_PENDING at once from one address. Refusals are ApiErrors."""
        try:
            async with self.slots.receiving(self.slots.client(scope)):
                return await read_body(receive, self.max_bytes if self.max_bytes is not None else upload_cap(),
                                       what=what)
        except BodyRefused as exc:
            raise ApiError(exc.status, str(exc)) from None

    @asynccontextmanager
    async def slot(self, scope) -> AsyncIterator[None]:
        """A turn of this client address (at most DLGUIDE_CLIENT_SLOTS at once), then one of the route's."""
        async with self.slots.turn(self.slots.client(scope)), self.turns:
            yield

    def answer(self, route: str, data: bytes, query: dict[str, str]) -> tuple[bytes, str]:
        from dlguide_core import booth_photos
        from dlguide_core.errors import DlguideError, ImageError, UsageError, error_summary

        name = photo_name(query.get("name", ""))
        try:
            loaded, predictor = self.served()
            teaching, head = booth_teach.head_for(query)  # a Teach visitor's head (issue 44), None for others
            if route == "classify":
                result = booth_photos.answer_photo(loaded, predictor, data, name, head=head)
                return json.dumps(booth_photos.answer_json(result, taught_flags=teaching)).encode(), "application/json"
            index = query.get("index", "")
            if not re.fullmatch(f"[0-9]{{1,{INDEX_DIGITS}}}", index):  # ASCII only: "²", "١" are digits to str
                raise ApiError(400, "heatmap needs ?index=N, the class to explain (a whole number, ASCII digits)")
            return booth_photos.heatmap_jpeg(loaded, predictor, data, name, int(index), head), "image/jpeg"
        except booth_teach.TeachRefused as exc:
            raise ApiError(exc.status, str(exc)) from None
        except (ImageError, UsageError) as exc:
            raise ApiError(400, str(exc)) from None
        except DlguideError as exc:
            raise ApiError(503, str(exc)) from None
        except ApiError:
            raise
        except Exception as exc:  # a visitor sees one line; the server's log keeps the traceback (no photo in it)
            LOG.exception("booth %s failed", route)
            raise ApiError(503, f"the booth could not answer ({error_summary(exc)}); please try again") from None


def photo_name(raw: str) -> str:
    """The photo's name as the visitor's browser gave it, for its error line only: printable, short."""
    name = re.sub(r"[^\w .,()+-]", "_", raw)[:NAME_CHARS].strip()
    return name or "photo"


def check_xsrf(scope) -> None:
    """Streamlit's double-submit check, as its upload route does it: the X-Xsrftoken header matches the cookie."""
    from starlette.requests import Request
    from streamlit.web.server.server_util import is_xsrf_enabled
    from streamlit.web.server.starlette.starlette_app_utils import validate_xsrf_token
    from streamlit.web.server.starlette.starlette_server_config import XSRF_COOKIE_NAME

    if not is_xsrf_enabled():
        return
    request = Request(scope)
    if not validate_xsrf_token(request.headers.get("x-xsrftoken"), request.cookies.get(XSRF_COOKIE_NAME)):
        raise ApiError(403, "XSRF token missing or invalid: reload the page")


async def respond(send, status: int, body: bytes, content_type: str, close: bool = False) -> None:
    """The answer; `close` ends the connection after it (a body refused unread is not waited for)."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"),
                            *([(b"connection", b"close")] if close else [])]})
    await send({"type": "http.response.body", "body": body})
