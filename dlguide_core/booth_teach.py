"""The booth's Teach tab on the server (issue 44; web/booth_teach.py serves it): each visitor's taught names, in memory.
A visitor is a random id the tab makes (`X-Booth-Visitor`, VISITOR_PATTERN). The first request that uses an id binds
it to the screen that sent it (an `owner` token: a hash of its XSRF cookie, or of its address where XSRF is off), so
another screen that sends the same id is refused. For each visitor the server holds only the pooled features of
their photos (never a photo, never a file) and, once they have learned, their head (dlguide_core.teach). All of it
is dropped at "Forget" (`forget`), at the screen's idle reset (which calls forget), after twice DLGUIDE_KIOSK_IDLE_S
without a request from that visitor (`sweep`, run at every request and by a timer), and, least recently seen
first, beyond DLGUIDE_TEACH_MAX_VISITORS visitors or DLGUIDE_TEACH_MAX_MB of features (dlguide_core.settings).
Every photo's forward runs in the booth's batching worker with the other visitors' classifications (one forward
gives its logits and features: booth.Predictor.features); the head trains in that worker too, between two
batches (`InferenceWorker.call`), so a Learn delays the others' answers by one head's training at most.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypedDict

import torch

from dlguide_core import settings, teach
from dlguide_core.booth import Predictor, idle_seconds
from dlguide_core.booth_photos import preprocessed
from dlguide_core.errors import DlguideError, UsageError
from dlguide_core.inference.backend_base import Outputs
from dlguide_core.inference.batching import Answer
from dlguide_core.vision.models import LoadedModel

VISITOR_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,64}")
IDLE_FACTOR = 2  # a visitor's state goes after IDLE_FACTOR x DLGUIDE_KIOSK_IDLE_S without a request


class TeachRefused(DlguideError):
    """A teach request refused, with its HTTP status and one line: 400 bad input, 403 another screen's visitor id,
    409 over a cap, 429 the visitor's previous request is still being worked on, 503 cannot answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TeachJson(TypedDict):
    name: str
    examples: int
    names: dict[str, int]


class LearnJson(TypedDict):
    names: list[str]
    examples: int
    learn_ms: float
    train_ms: float
    loss: list[float]
    steps: int
    device: str
    backend: str


class ForgetJson(TypedDict):
    forgotten: bool
    names: dict[str, int]


@dataclass
class _Visitor:
    owner: str
    seen: float
    features: dict[str, list[torch.Tensor]] = field(default_factory=dict)  # name -> its photos' (D,) features
    base: dict[str, list[torch.Tensor]] = field(default_factory=dict)  # name -> its photos' (C,) logits
    head: teach.TaughtHead | None = None
    busy: bool = False

    def counts(self) -> dict[str, int]:
        return {name: len(rows) for name, rows in self.features.items()}

    def nbytes(self) -> int:
        rows = [t for rows in (*self.features.values(), *self.base.values()) for t in rows]
        held = sum(t.numel() * t.element_size() for t in rows)
        if self.head is not None:
            held += self.head.weight.numel() * 4 + self.head.bias.numel() * 4
        return held


def check_visitor(raw: str | None) -> str:
    """The X-Booth-Visitor header's id; TeachRefused(400) when missing or not 16-64 of [A-Za-z0-9_-]."""
    if not raw or not VISITOR_PATTERN.fullmatch(raw):
        raise TeachRefused(400, "X-Booth-Visitor must be 16-64 characters of A-Z, a-z, 0-9, _ and -")
    return raw


def owner_token(secret: str) -> str:
    """What binds a visitor id to its screen: a hash of the screen's XSRF cookie (or address), never the value."""
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()[:32]


class TeachStore:
    """Every visitor's taught names, in memory (module doc). Thread-safe; one per served booth."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, idle_s: float | None = None) -> None:
        self.clock = clock
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._visitors: OrderedDict[str, _Visitor] = OrderedDict()  # least recently seen first
        self._timer: threading.Thread | None = None
        self._refs: dict[tuple[str, str], Outputs] = {}
        self._refs_lock = threading.Lock()

    # -- state ------------------------------------------------------------------------------------------------
    def forget_after_s(self) -> float:
        return IDLE_FACTOR * (self.idle_s if self.idle_s is not None else idle_seconds())

    def sweep(self) -> int:
        """Drop the visitors unseen for forget_after_s; how many went."""
        cutoff = self.clock() - self.forget_after_s()
        with self._lock:
            gone = [v for v, state in self._visitors.items() if state.seen < cutoff and not state.busy]
            for visitor in gone:
                del self._visitors[visitor]
        return len(gone)

    def visitors(self) -> int:
        return len(self._visitors)

    def held_bytes(self) -> int:
        with self._lock:
            return sum(state.nbytes() for state in self._visitors.values())

    def names(self, visitor: str) -> dict[str, int]:
        with self._lock:
            state = self._visitors.get(visitor)
            return state.counts() if state else {}

    def head(self, visitor: str | None, owner: str) -> teach.TaughtHead | None:
        """The visitor's learned head (None before Learn, after Forget, or for no visitor)."""
        self.sweep()
        if visitor is None:
            return None
        with self._lock:
            state = self._visitors.get(visitor)
            if state is None:
                return None
            self._check_owner(state, owner)
            self._touch(visitor, state)
            return state.head

    def forget(self, visitor: str, owner: str) -> ForgetJson:
        with self._lock:
            state = self._visitors.get(visitor)
            if state is not None:
                self._check_owner(state, owner)
                del self._visitors[visitor]
        return {"forgotten": True, "names": {}}

    def _check_owner(self, state: _Visitor, owner: str) -> None:
        if state.owner != owner:
            raise TeachRefused(403, "this visitor id belongs to another screen: reload the page")

    def _touch(self, visitor: str, state: _Visitor) -> None:
        state.seen = self.clock()
        self._visitors.move_to_end(visitor)

    @contextmanager
    def _working(self, visitor: str, owner: str, *, create: bool) -> Iterator[_Visitor]:
        """The visitor's state, marked busy for the request (a second one at once is refused: 429)."""
        self.sweep()
        with self._lock:
            state = self._visitors.get(visitor)
            if state is None:
                if not create:
                    raise TeachRefused(400, "nothing taught yet: show the booth some photos first")
                state = self._visitors[visitor] = _Visitor(owner, self.clock())
            self._check_owner(state, owner)
            if state.busy:
                raise TeachRefused(429, "one photo at a time: wait for the last one's answer")
            state.busy = True
            self._touch(visitor, state)
        self._start_timer()
        try:
            yield state
        finally:
            with self._lock:
                state.busy = False
                if not state.features and visitor in self._visitors and self._visitors[visitor] is state:
                    del self._visitors[visitor]  # a first photo that failed leaves nothing behind
                self._enforce_caps(keep=visitor)

    def _enforce_caps(self, keep: str) -> None:
        """Least recently seen visitors first, past the visitor cap or the memory bound (never `keep`)."""
        most, budget = settings.teach_max_visitors(), settings.teach_max_bytes()
        total = sum(state.nbytes() for state in self._visitors.values())
        for visitor in list(self._visitors):
            if len(self._visitors) <= most and total <= budget:
                break
            state = self._visitors[visitor]
            if visitor == keep or state.busy:
                continue
            total -= state.nbytes()
            del self._visitors[visitor]

    def _start_timer(self) -> None:
        """A daemon thread that sweeps while anyone has taught names (a visitor who just leaves is dropped too)."""
        with self._lock:
            if self._timer is not None and self._timer.is_alive():
                return
            self._timer = threading.Thread(target=self._sweeping, name="dlguide-teach-sweep", daemon=True)
            self._timer.start()

    def _sweeping(self) -> None:
        while True:
            time.sleep(max(0.5, min(30.0, self.forget_after_s() / 4)))
            self.sweep()
            with self._lock:
                if not self._visitors:
                    self._timer = None
                    return

    # -- the routes ---------------------------------------------------------------------------------------------
    def teach_photo(self, loaded: LoadedModel, predictor: Predictor, visitor: str, owner: str, raw_name: str,
                    data: bytes, photo_name: str = "photo") -> TeachJson:
        """One photo of `raw_name`: checked against the caps, its forward in the worker's batch, its features kept."""
        from dlguide_core.vision import image_threads

        try:
            name = teach.check_name(raw_name)
        except UsageError as exc:
            raise TeachRefused(400, str(exc)) from None
        with self._working(visitor, owner, create=True) as state:
            counts = state.counts()
            most_names, most_photos = settings.teach_max_names(), settings.teach_max_photos()
            if name not in counts and len(counts) >= most_names:
                raise TeachRefused(409, f"{most_names} names at most: Learn, or Forget and start again")
            if counts.get(name, 0) >= most_photos:
                raise TeachRefused(409, f"{name} has {most_photos} photos already: that is the most")
            batch = image_threads.run(preprocessed, data, photo_name, loaded)
            both = _both_heads(predictor.worker.infer(batch))
            self.warm(loaded, predictor)
            with self._lock:
                state.features.setdefault(name, []).append(both.features[0].clone())
                state.base.setdefault(name, []).append(both.logits[0].clone())
                state.head = None  # a new photo: Learn again
                counts = state.counts()
            return {"name": name, "examples": counts[name], "names": counts}

    def learn(self, loaded: LoadedModel, predictor: Predictor, visitor: str, owner: str) -> LearnJson:
        """Train the visitor's head in the booth's worker, between two batches; 400 with too few names or photos."""
        start = time.perf_counter()
        with self._working(visitor, owner, create=False) as state:
            with self._lock:
                taught = {name: Outputs(torch.stack(state.base[name]), torch.stack(rows))
                          for name, rows in state.features.items()}
            try:
                teach.check_enough({name: len(out.features) for name, out in taught.items()})
            except UsageError as exc:
                raise TeachRefused(400, str(exc)) from None
            refs = self.references(loaded, predictor)
            head = predictor.worker.call(lambda: teach.fit_head(taught, refs))
            with self._lock:
                state.head = head
        return {"names": list(head.names), "examples": head.examples,
                "learn_ms": round((time.perf_counter() - start) * 1000, 2), "train_ms": head.train_ms,
                "loss": list(head.loss), "steps": len(head.loss), "device": predictor.device,
                "backend": predictor.backend}

    def references(self, loaded: LoadedModel, predictor: Predictor) -> Outputs:
        """The reference photos' logits and features through the booth's own worker (teach.references), once per
        model and backend; the first call also warms the head's training in the worker (torch's first-run set-up)."""
        key = (loaded.fingerprint, predictor.backend)
        with self._refs_lock:
            if key not in self._refs:
                refs = teach.references(loaded, lambda batch: _both_heads(predictor.worker.infer(batch)))
                warm = {name: Outputs(refs.logits[i:i + 3], refs.features[i:i + 3]) for name, i in (("a", 0), ("b", 3))}
                predictor.worker.call(lambda: teach.fit_head(warm, refs, steps=3))
                self._refs[key] = refs
            return self._refs[key]

    def warm(self, loaded: LoadedModel, predictor: Predictor) -> None:
        """`references` in a background thread, at a visitor's first photo (a Learn then finds them ready); a
        failure is left for that Learn to say."""
        if (loaded.fingerprint, predictor.backend) in self._refs or self._refs_lock.locked():
            return
        threading.Thread(target=self._warm, args=(loaded, predictor), name="dlguide-teach-warm", daemon=True).start()

    def _warm(self, loaded: LoadedModel, predictor: Predictor) -> None:
        with contextlib.suppress(DlguideError):
            self.references(loaded, predictor)


def _both_heads(answer: Answer) -> Outputs:
    """A worker's answer as both heads; TeachRefused(503) from a forward that gives no features."""
    if answer.features is None:
        raise TeachRefused(503, "this booth's backend gives no features: Teach is off")
    return Outputs(answer.logits, answer.features)
