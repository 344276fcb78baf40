"""What a browser may ask the served app to do (issue 33, N2 and N3), decided before Streamlit does the work.

Streamlit 1.67 hands every message of a websocket (a BackMsg) to `Runtime.handle_backmsg`, which does what it
says for whoever sent it:
- `clear_cache` empties every cache of the process (st.cache_resource and st.cache_data), for all visitors: the
  booth's next visitor waited about 19 s instead of 0.6 s, and RSS went 1.08 -> 2.24 GB over four clears. A
  served dlguide has no use for it (the developer menu that sends it is hidden), so it is dropped, with
  `set_run_on_save` and `load_git_info` (developer tools too: a rerun on every file save, a `git` process).
- `rerun_script` starts a script run, and (runner.fastReruns) stops the one under way, whose thread goes on until
  its next Streamlit call. A client sending 100 at once kept the server from answering its health check for
  31-36 s (300: over 60 s): dozens of script threads ran at once. Here a session runs one script at a time: a
  rerun while its script runs interrupts it only within a small budget (INTERRUPT_BURST, then INTERRUPT_PER_S,
  so a visitor's clicks stay quick); past that it is held, and delivered when the run finishes (seen in the
  `script_finished` message the session sends its browser), or after STUCK_S. A session holds ONE rerun: a newer
  one replaces it, and two of different fragments (or a fragment's and the page's) become one run of the page with
  the newest one's state, which runs every fragment (issue 43, P3: held per fragment id, which the client picks,
  2,000 reruns x 64 KB with unique ids held 190 MB after their session closed). The browser sends every widget's
  state with each rerun, so the latest state always arrives; a flood costs a few runs. A session's held rerun is
  dropped when it disconnects or closes.
serve.py installs this once, before the server starts (`install`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamlit.proto.BackMsg_pb2 import BackMsg

DROPPED = frozenset({"clear_cache", "set_run_on_save", "load_git_info"})
INTERRUPT_BURST = 3  # reruns that may stop a run under way, at once (a few quick clicks)
INTERRUPT_PER_S = 1.0
STUCK_S = 5.0  # a run whose end is not seen in this time (a long one, or a rerun of a fragment gone, which
# runs nothing) no longer holds the next one back; a sustained flood costs about INTERRUPT_PER_S runs a second
FORGET_AFTER_S = 600.0  # a session silent this long (gone, most likely) is forgotten
SWEEP_EVERY = 256  # messages between two sweeps of forgotten sessions

LOG = logging.getLogger("dlguide.control")


@dataclass(frozen=True)
class Held:
    msg: BackMsg  # its rerun_script: the newest state; its fragment id "" when it became a run of the page
    deliver: Callable[[], None]


@dataclass
class SessionBudget:
    tokens: float  # interruptions left
    at: float  # when `tokens` was counted, or the session last heard of
    running: bool = False  # a rerun was delivered and its script_finished not seen yet
    held: Held | None = None  # the one rerun waiting for the run under way
    timer: asyncio.TimerHandle | None = None
    warned: bool = False


class ControlPolicy:
    """Per session: drops DROPPED messages, runs one script at a time and holds reruns past the budget."""

    def __init__(self, burst: int = INTERRUPT_BURST, per_s: float = INTERRUPT_PER_S, stuck_s: float = STUCK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.per_s, self.stuck_s, self.clock = burst, per_s, stuck_s, clock
        self.sessions: dict[str, SessionBudget] = {}
        self.seen = 0
        self.dropped = 0
        self.held = 0
        self.replaced = 0  # held reruns a newer one replaced
        self.delivered = 0

    def admit(self, session_id: str, msg, deliver: Callable[[], None]) -> None:
        """Deliver `msg` now (`deliver()`), later, or never."""
        kind = msg.WhichOneof("type")
        self.seen += 1
        if self.seen % SWEEP_EVERY == 0:
            self.sweep()
        if kind in DROPPED:
            self.dropped += 1
            budget = self.budget(session_id)
            if not budget.warned:
                budget.warned = True
                LOG.warning("dropped a %s message from session %s (not served; issue 33)", kind, session_id)
            return
        if kind != "rerun_script":
            deliver()
            return
        budget = self.budget(session_id)
        if not budget.held and (not budget.running or self.take(budget)):
            self.run(budget, deliver)
            return
        self.held += 1
        if budget.held is not None:
            self.replaced += 1
            if budget.held.msg.rerun_script.fragment_id != msg.rerun_script.fragment_id:
                msg.rerun_script.fragment_id = ""  # what both asked for: the page's run covers every fragment
                msg.rerun_script.is_auto_rerun = False
        budget.held = Held(msg, deliver)  # the newest state replaces the older held one
        if budget.timer is None:
            budget.timer = asyncio.get_running_loop().call_later(self.stuck_s, self.finished, session_id)

    def finished(self, session_id: str) -> None:
        """The session's script run ended: the next held rerun (if any) runs now."""
        budget = self.sessions.get(session_id)
        if budget is None:
            return
        budget.running = False
        if budget.timer is not None:
            budget.timer.cancel()
            budget.timer = None
        if budget.held is not None:
            held, budget.held = budget.held, None
            self.run(budget, held.deliver)

    def forget(self, session_id: str) -> None:
        """The session went (its websocket closed, or Streamlit closed it): whatever it held goes with it."""
        budget = self.sessions.pop(session_id, None)
        if budget is not None and budget.timer is not None:
            budget.timer.cancel()

    def run(self, budget: SessionBudget, deliver: Callable[[], None]) -> None:
        budget.running = True
        budget.at = self.clock()
        self.delivered += 1
        deliver()

    def budget(self, session_id: str) -> SessionBudget:
        budget = self.sessions.get(session_id)
        if budget is None:
            budget = self.sessions[session_id] = SessionBudget(float(self.burst), self.clock())
        return budget

    def take(self, budget: SessionBudget) -> bool:
        now = self.clock()
        budget.tokens = min(float(self.burst), budget.tokens + (now - budget.at) * self.per_s)
        budget.at = now
        if budget.tokens >= 1.0:
            budget.tokens -= 1.0
            return True
        return False

    def watch(self, session_id: str, client) -> None:
        """Learn when `client`'s session ends a run: wrap its write_forward_msg (Streamlit's SessionClient
        interface, called on the event loop) once."""
        if client is None or getattr(client, "dlguide_watched", False):
            return
        send = client.write_forward_msg

        def write_forward_msg(msg) -> None:
            send(msg)
            if msg.WhichOneof("type") == "script_finished":
                self.finished(session_id)

        client.write_forward_msg = write_forward_msg
        client.dlguide_watched = True

    def sweep(self) -> None:
        now = self.clock()
        for session_id, budget in list(self.sessions.items()):
            if budget.held is None and now - budget.at > FORGET_AFTER_S:
                del self.sessions[session_id]


def install(runtime_class: type, policy: ControlPolicy | None = None) -> ControlPolicy:
    """Put `policy` in front of `runtime_class.handle_backmsg` (Streamlit's Runtime): every websocket message of
    every session passes it first. Streamlit's own checks (a stale client, a stopped runtime) stay where they are.
    Its disconnect_session and close_session tell the policy first that the session went."""
    original = getattr(runtime_class, "handle_backmsg", None)
    if original is None or getattr(original, "dlguide_policy", None) is not None:
        if original is None:  # checked with 1.67; fail loudly if it moves
            raise RuntimeError("streamlit's Runtime.handle_backmsg is gone: check web/control_messages.py")
        return original.dlguide_policy
    chosen = policy or ControlPolicy()

    ends = {name: getattr(runtime_class, name, None) for name in ("disconnect_session", "close_session")}
    if None in ends.values():  # checked with 1.67; fail loudly if they move
        raise RuntimeError("streamlit's Runtime.disconnect_session/close_session moved: check web/control_messages.py")

    def handle_backmsg(self, session_id: str, msg, *, client=None) -> None:
        chosen.watch(session_id, client)
        chosen.admit(session_id, msg, lambda: original(self, session_id, msg, client=client))

    def ending(name: str, end: Callable[..., None]) -> Callable[..., None]:
        def session_ends(self, session_id: str, *args, **kwargs) -> None:
            chosen.forget(session_id)  # its held rerun goes with it (issue 43, P3)
            end(self, session_id, *args, **kwargs)

        session_ends.__name__ = name
        return session_ends

    handle_backmsg.dlguide_policy = chosen  # type: ignore[attr-defined]
    runtime_class.handle_backmsg = handle_backmsg  # type: ignore[attr-defined]
    for name, end in ends.items():
        setattr(runtime_class, name, ending(name, end))  # type: ignore[arg-type]
    return chosen
