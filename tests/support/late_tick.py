"""A fragment timer's tick that lands just after a user's action, on purpose (served browser tests).

On a busy server a `st.fragment(run_every=...)` tick can reach Streamlit while the run of a user's action (a full
rerun, or the rerun of the fragment the tapped widget is in: the booth's visitor screen) is under way; Streamlit
then runs that timer once more after the action's run, at the place the timer had when it was declared.
`LateTick` makes that happen every time: once armed, it holds the page's next action (a rerun request the user's
tap sent, not a timer's) until the page's next timer tick, then lets the action through and the tick `delay_ms`
later."""

from __future__ import annotations

import re
import time


def _rerun_kind(message: object) -> str | None:
    """"action" for a rerun request a user's tap sent, "tick" for a timer's, None for anything else."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    if not isinstance(message, bytes):
        return None
    msg = BackMsg()
    msg.ParseFromString(message)
    if msg.WhichOneof("type") != "rerun_script":
        return None
    return "tick" if msg.rerun_script.is_auto_rerun else "action"


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
            kind = _rerun_kind(message)
            if self.armed and kind == "action" and self.rerun is None:
                self.rerun = message  # the user's action: held...
            elif self.armed and kind == "tick" and self.rerun is not None and self.tick is None:
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
        assert self.rerun is not None, "the action sent no rerun"
        assert self.tick is not None, "no fragment tick after the action"
        self.armed = False
        self.server.send(self.rerun)
        self.page.wait_for_timeout(delay_ms)
        self.server.send(self.tick)
