"""A fragment timer's tick that lands just after a full rerun, on purpose (served browser tests).

On a busy server a `st.fragment(run_every=...)` tick can reach Streamlit while a full rerun (the user's action) is
under way; Streamlit then runs that fragment once more after the full run, at the place the fragment had when it
was declared. `LateTick` makes that happen every time: once armed, it holds the page's next full-rerun request
until the page's next fragment tick, then lets the rerun through and the tick `delay_ms` later."""

from __future__ import annotations

import re
import time


def _fragment_of(message: object) -> str | None:
    """"" for a full rerun request, the fragment's id for a tick, None for anything else."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    if not isinstance(message, bytes):
        return None
    msg = BackMsg()
    msg.ParseFromString(message)
    return msg.rerun_script.fragment_id if msg.WhichOneof("type") == "rerun_script" else None


class LateTick:
    def __init__(self, page) -> None:
        self.page = page
        self.armed = False
        self.rerun: object = None
        self.tick: object = None
        self.server = None
        page.route_web_socket(re.compile(r"/_stcore/stream"), self._route)

    def _route(self, socket) -> None:
        server = self.server = socket.connect_to_server()

        def from_page(message) -> None:
            fragment = _fragment_of(message)
            if self.armed and fragment == "" and self.rerun is None:
                self.rerun = message  # the user's full rerun: held...
            elif self.armed and fragment and self.rerun is not None and self.tick is None:
                self.tick = message  # ...until the page's next tick
            else:
                server.send(message)

        socket.on_message(from_page)

    def arm(self) -> None:
        self.armed, self.rerun, self.tick = True, None, None

    def release(self, delay_ms: int, timeout_s: float = 15) -> None:
        """Wait for the held rerun and the next tick, then send the rerun and the tick `delay_ms` after it."""
        deadline = time.monotonic() + timeout_s
        while (self.rerun is None or self.tick is None) and time.monotonic() < deadline:
            self.page.wait_for_timeout(10)
        assert self.rerun is not None, "the action sent no full rerun"
        assert self.tick is not None, "no fragment tick after the action"
        self.armed = False
        self.server.send(self.rerun)
        self.page.wait_for_timeout(delay_ms)
        self.server.send(self.tick)
