"""Booth visitors without a browser: each opens the page over Streamlit's websocket (/_stcore/stream: the page's one
script run), then, per round, posts a camera shot to the booth's HTTP route (web/booth_api.py: POST
/_booth/classify, the answer as JSON) and taps "Start over" (which the browser does alone: no request). A crowd of
them is `drive`; the booth's selectors for a real browser are here too. Used by the served tests and bench/."""

from __future__ import annotations

import functools
import http.cookiejar
import io
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import numpy as np
import psutil
from PIL import Image
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from websockets.sync.client import connect

from tests.support.accounting import cpu_s, percentile, sample_gpu, sampling_rss

FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR,
            ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}
# The booth's visitor screen in a browser (ui/booth_screen.js): its "Upload" tab, photo input and "Start over"
UPLOAD_TAB = ".booth-tab[data-tab=upload]"
PHOTO_INPUT = ".booth-screen input[type=file]"
START_OVER = ".booth-restart"
ANSWERED = "I think it's a"
ATTRACT = "Show the camera something, or upload a photo!"
BATCH_NOTE = re.compile(r"batch of (\d+)")  # the answer's "in a batch of N photos" note


@dataclass
class RunResult:
    """What one script run sent back: markdown and HTML bodies, the pictures shown, errors."""

    images: list[str] = field(default_factory=list)  # the URLs of the pictures shown (the browser GETs each)
    markdown: list[str] = field(default_factory=list)  # markdown and HTML bodies
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    elements: int = 0  # elements and blocks the run drew: each is a message the server's Python handles
    status: int = 0  # how it finished: ForwardMsg.FINISHED_SUCCESSFULLY (the page) or FINISHED_FRAGMENT_RUN_...


class BoothSession:
    """One visitor: a Streamlit websocket session driven without a browser."""

    def __init__(self, url: str, timeout: float = 120.0, cookie: str = "") -> None:
        self.url = url
        self.timeout = timeout
        self.cookie = cookie  # "name=value; " of the full app's token (issue 33); the booth needs none
        jar = http.cookiejar.CookieJar()
        self.http = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        self.http.open(f"{url}/_stcore/health", timeout=timeout).read()  # sets the _streamlit_xsrf cookie
        self.xsrf = next(c.value for c in jar if c.name == "_streamlit_xsrf")
        self.session_id = ""
        self.page_hash = ""  # the page's script hash, as the browser sends it back with each rerun
        self.last = RunResult()

    def __enter__(self) -> BoothSession:
        ws_url = self.url.replace("http://", "ws://") + "/_stcore/stream"
        self._connection = connect(ws_url, subprotocols=["streamlit", self.xsrf], origin=self.url,
                                   open_timeout=self.timeout, max_size=None,
                                   additional_headers={"Cookie": f"{self.cookie}_streamlit_xsrf={self.xsrf}"})
        self.ws = self._connection.__enter__()
        self.rerun([])  # what a tab does on load: the first run, which also names the session
        return self

    def __exit__(self, *exc_info) -> None:
        self._connection.__exit__(*exc_info)

    def _send(self, msg: BackMsg) -> None:
        self.ws.send(msg.SerializeToString())

    def _receive(self) -> ForwardMsg:
        return self.receive(self.timeout)

    def receive(self, timeout: float) -> ForwardMsg:
        """The server's next message to this tab; TimeoutError when none comes within `timeout` seconds."""
        msg = ForwardMsg()
        msg.ParseFromString(self.ws.recv(timeout=timeout))
        return msg

    def rerun(self, widgets: list[WidgetState], fragment_id: str = "") -> RunResult:
        """A script run, as the browser asks for it: of the page, or of the fragment a changed widget is in."""
        start = time.perf_counter()
        state = ClientState(widget_states=WidgetStates(widgets=widgets), fragment_id=fragment_id,
                            page_script_hash=self.page_hash)
        self._send(BackMsg(rerun_script=state))
        result = RunResult()
        while True:
            msg = self._receive()
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.session_id = msg.new_session.initialize.session_id or self.session_id
                self.page_hash = msg.new_session.page_script_hash or self.page_hash
            elif kind == "delta":
                result.elements += msg.delta.WhichOneof("type") in ("new_element", "add_block")
                if msg.delta.WhichOneof("type") == "new_element":
                    record_element(result, msg.delta.new_element)
            elif kind == "script_finished" and msg.script_finished in FINISHED:
                result.seconds, result.status = time.perf_counter() - start, msg.script_finished
                self.last = result
                for url in result.images:  # what the browser fetches to show them
                    self._http("GET", url, None, {})
                return result

    def post(self, route: str, query: dict[str, str], body: bytes) -> bytes:
        """A POST to the booth's HTTP route, as the visitor's screen sends it (the XSRF cookie and header)."""
        from urllib.parse import urlencode

        request = urllib.request.Request(f"{self.url}/_booth/{route}?{urlencode(query)}", data=body, method="POST",
                                         headers={"X-Xsrftoken": self.xsrf, "Content-Type": "image/jpeg"})
        with self.http.open(request, timeout=self.timeout) as response:
            return response.read()

    def classify(self, data: bytes, *, heatmap: bool = False) -> tuple[Answered, float]:
        """Post a camera shot and wait for its answer (then its Grad-CAM if asked); returns the answer and the
        visitor's wait for it in seconds. An HTTP error's one line is the answer's error."""
        start = time.perf_counter()
        try:
            answered = Answered(json.loads(self.post("classify", {"name": "camera.jpg"}, data)))
        except urllib.error.HTTPError as exc:
            return Answered({}, error=f"HTTP {exc.code}: {json.loads(exc.read() or b'{}').get('error')}"), 0.0
        waited = time.perf_counter() - start
        if heatmap:
            answered.heatmap = self.post("heatmap", {"name": "camera.jpg", "index": str(answered.top[0]["index"])},
                                         data)
        return answered, waited

    def start_over(self) -> None:
        """What "Start over" sends the server: nothing (the visitor's screen forgets the photo itself)."""


@dataclass
class Answered:
    """The booth's answer to one photo (booth_photos.answer_json's keys), its Grad-CAM when asked, or an error."""

    answer: dict
    heatmap: bytes = b""
    error: str = ""

    @property
    def top(self) -> list[dict]:
        return self.answer.get("top", [])

    def problem(self) -> str:
        """Why this is no answer a visitor could use ("" when it is one)."""
        if self.error:
            return self.error
        if len(self.top) != 5 or not self.answer.get("label") or self.answer.get("batch_size", 0) < 1:
            return f"not a top-5 answer: {self.answer}"
        return ""


def record_element(result: RunResult, element) -> None:
    kind = element.WhichOneof("type")
    if kind == "markdown":
        result.markdown.append(element.markdown.body)
    elif kind == "html":
        result.markdown.append(element.html.body)
    elif kind == "imgs":
        result.images.extend(image.url for image in element.imgs.imgs if image.url)
    elif kind == "exception":
        result.errors.append(f"exception: {element.exception.message}")
    elif kind == "alert" and element.alert.format == element.alert.ERROR:
        result.errors.append(f"error: {element.alert.body}")


@functools.cache
def shot(seed: int, size: tuple[int, int] = (320, 240)) -> bytes:
    """A distinct JPEG per round, so no result is reused from a previous photo; made once (`photos_for` makes a
    phase's before it starts: the visitors' phones bring their photos, the server's cores do not make them)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def visitor(url: str, rounds: int, seed: int, latencies: list[float], errors: list[str],
            timeout: float = 120.0, batches: list[int] | None = None, think_s: float = 0.0) -> None:
    """One session: `rounds` photos, each classified, checked for a top-5, then "Start over"; with `think_s`, a
    person's look at each answer first (0.5-1.5x that, drawn per answer) and a first photo at a moment drawn within
    it (0: every visitor at once and the next photo at once, a crowd that never stops)."""
    batches = [] if batches is None else batches
    looks = np.random.default_rng(seed)
    try:
        with BoothSession(url, timeout=timeout) as session:
            if think_s:  # people arrive at their own moments, not in step
                time.sleep(looks.uniform(0, think_s))
            for i in range(rounds):
                answered, waited = session.classify(shot(seed * 10_000 + i))
                if answered.problem():
                    errors.append(f"session {seed} round {i}: {answered.problem()}")
                    continue
                latencies.append(waited)
                batches.append(answered.answer["batch_size"])
                if think_s:
                    time.sleep(think_s * looks.uniform(0.5, 1.5))
                session.start_over()
    except Exception as exc:  # reported, not raised: one failed session must not hide the others
        errors.append(f"session {seed}: {exc!r}")


def photos_for(sessions: int, rounds: int, seed: int) -> None:
    """Make the photos `drive(url, sessions, rounds, seed)` will send, before it is timed."""
    for s in range(sessions):
        for i in range(rounds):
            shot((seed + s) * 10_000 + i)


def drive(url: str, sessions: int, rounds: int, seed: int = 0, timeout: float = 120.0,
          batches: list[int] | None = None, think_s: float = 0.0) -> tuple[list[float], list[str]]:
    photos_for(sessions, rounds, seed)
    latencies: list[float] = []
    errors: list[str] = []
    threads = [threading.Thread(target=visitor, args=(url, rounds, seed + s, latencies, errors, timeout, batches,
                                                      think_s))
               for s in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors


def run_load(url: str, server_pid: int, *, sessions: int = 10, rounds: int = 50,
             single_rounds: int = 10, think_s: float = 0.0, probe=None) -> dict:
    """Warm up, time one session alone, then `sessions` at once; RSS around the concurrent part. `probe`: a
    function that returns the booth backend's forward CPU ms per image at batch 1, timed in this process while the
    server is idle; called before, between and after the two phases, so that each phase's server CPU is set against
    the forward as this machine ran it then (its speed drifts: a whole run read 30 % slower here, server and forward
    alike)."""
    server = psutil.Process(server_pid)
    probes: list[float] = []
    # Warm-up at full concurrency: model load, first inferences, allocator and thread pools at steady state.
    # A fresh server may first export and compile the model (tens of seconds on a loaded CPU): wait longer.
    _, warm_errors = drive(url, sessions=sessions, rounds=1, seed=900, timeout=300.0)
    if probe:
        probes.append(probe())
    photos_for(1, single_rounds, 1000)
    cpu_start = cpu_s(server)
    single, single_errors = drive(url, sessions=1, rounds=single_rounds, seed=1000)
    single_cpu = cpu_s(server) - cpu_start
    if probe:
        probes.append(probe())
    rss_before = server.memory_info().rss
    done = threading.Event()
    rss = sampling_rss(server)
    samples = rss.__enter__()
    gpu: list[float] = []
    gpu_sampler = threading.Thread(target=sample_gpu, args=(gpu, done), daemon=True)
    gpu_sampler.start()
    batches: list[int] = []
    photos_for(sessions, rounds, 2000)
    load_before, cpu_start = os.getloadavg()[0], cpu_s(server)
    start = time.perf_counter()
    many, many_errors = drive(url, sessions=sessions, rounds=rounds, seed=2000, batches=batches, think_s=think_s)
    wall = time.perf_counter() - start
    many_cpu, load_after = cpu_s(server) - cpu_start, os.getloadavg()[0]
    if probe:
        probes.append(probe())
    done.set()
    rss.__exit__(None, None, None)
    gpu_sampler.join()
    rss_after = server.memory_info().rss
    single_p95, many_p95 = percentile(single, 95), percentile(many, 95)
    return {
        "sessions": sessions, "rounds": rounds, "think_s": think_s, "classifications": len(many),
        "errors": warm_errors + single_errors + many_errors,
        "single_p50_s": percentile(single, 50), "single_p95_s": single_p95,
        "concurrent_p50_s": percentile(many, 50), "concurrent_p95_s": many_p95,
        "p95_ratio": many_p95 / single_p95 if single_p95 else float("nan"),
        "throughput_per_s": len(many) / wall if wall else 0.0,
        "single_server_cpu_per_classification_s": single_cpu / len(single) if single else float("nan"),
        "server_cpu_per_classification_s": many_cpu / len(many) if many else float("nan"),
        # batch size -> how many visitors' answers came from a batch of that size (the booth's caption says it)
        "batch_histogram": {str(b): batches.count(b) for b in sorted(set(batches))},
        "loadavg_1min_before_after": [round(load_before, 2), round(load_after, 2)],
        # the accelerator's utilisation (%) sampled every 0.5 s over the concurrent phase, where there is one
        "gpu_utilisation_mean_max": [round(float(np.mean(gpu)), 1), max(gpu)] if gpu else None,
        "rss_before_mb": rss_before / 2**20, "rss_after_mb": rss_after / 2**20,
        "rss_growth": (rss_after - rss_before) / rss_before,
        # RSS at 0, 25, 50, 75 and 100 % of the concurrent phase: a plateau is allocator warm-up, a slope a leak
        "rss_quartiles_mb": samples.quartiles(),
        "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX", "default"),
        **in_run_overheads(probes, single_cpu / len(single) if single else float("nan"),
                           many_cpu / len(many) if many else float("nan")),
    }


def in_run_overheads(probes: list[float], single_cpu_s: float, many_cpu_s: float) -> dict:
    """The server's CPU per classification beyond one batch-1 forward, each phase against the forward timed
    around it (the mean of the probes before and after it)."""
    if len(probes) != 3:
        return {}
    single_fwd, many_fwd = (probes[0] + probes[1]) / 2, (probes[1] + probes[2]) / 2
    return {"forward_probes_ms": [round(p, 1) for p in probes],
            "in_run_single_server_cpu_minus_forward_ms": single_cpu_s * 1000 - single_fwd,
            "in_run_server_cpu_minus_forward_ms": many_cpu_s * 1000 - many_fwd}
