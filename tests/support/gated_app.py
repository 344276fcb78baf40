"""The app a gate of web/ stands in front of in its tests (the Origin check, the token gate): plain text on every path,
a websocket at /_stcore/stream that says "in" and closes."""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("in")
    await websocket.close()


def gated_app(answer: Callable[[Request], str], methods: list[str]) -> Starlette:
    """`answer(request)` for every path and each of `methods`, and the websocket: what a test sees got through."""
    return Starlette(routes=[Route("/{path:path}", lambda request: PlainTextResponse(answer(request)), methods=methods),
                             WebSocketRoute("/_stcore/stream", echo)])
