"""Booth load test: N concurrent visitors on one served kiosk, each doing what a browser tab does, minus the drawing.

A visitor opens the page (Streamlit's websocket, /_stcore/stream: the page's one script run), then, per round,
posts a camera shot to the booth's HTTP route (web/booth_api.py: POST /_booth/classify, the answer as JSON) and
taps "Start over" (which the browser does alone: no request). Reports errors, single-visitor vs concurrent latency
(p50/p95), the server's RSS before and after the measured classifications, the server's CPU seconds per
classification (every process of the server, the measured phase only) beside the booth backend's own forward CPU
time at the batch sizes the server ran (measured after the server stops, same weights and backend), the batch sizes
the answers report (a histogram), and the load average. tests/served/test_booth_load.py runs it small; run this
for the real numbers:

    .venv/bin/python bench/bench_kiosk_load.py --sessions 10 --rounds 50
"""

from __future__ import annotations

import argparse
import functools
import http.cookiejar
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil
from PIL import Image
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
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


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


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
    cpu_start = server_cpu_s(server)
    single, single_errors = drive(url, sessions=1, rounds=single_rounds, seed=1000)
    single_cpu = server_cpu_s(server) - cpu_start
    if probe:
        probes.append(probe())
    rss_before = server.memory_info().rss
    samples: list[int] = []
    done = threading.Event()
    sampler = threading.Thread(target=sample_rss, args=(server, samples, done), daemon=True)
    sampler.start()
    gpu: list[float] = []
    gpu_sampler = threading.Thread(target=sample_gpu, args=(gpu, done), daemon=True)
    gpu_sampler.start()
    batches: list[int] = []
    photos_for(sessions, rounds, 2000)
    load_before, cpu_start = os.getloadavg()[0], server_cpu_s(server)
    start = time.perf_counter()
    many, many_errors = drive(url, sessions=sessions, rounds=rounds, seed=2000, batches=batches, think_s=think_s)
    wall = time.perf_counter() - start
    many_cpu, load_after = server_cpu_s(server) - cpu_start, os.getloadavg()[0]
    if probe:
        probes.append(probe())
    done.set()
    sampler.join()
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
        "rss_quartiles_mb": [samples[min(len(samples) - 1, int(q * (len(samples) - 1)))] / 2**20
                             for q in (0, 0.25, 0.5, 0.75, 1.0)] if samples else [],
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


def server_cpu_s(server: psutil.Process) -> float:
    """CPU seconds (user + system) of the server process and every process it started, alive now."""
    total = 0.0
    for proc in [server, *server.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


WARMUP_RUNS = 5


def booth_backend(booth_line: str):
    """(label, the prepared backend or None, the loaded model): the backend the booth's "booth ready" line names
    ("LABEL · PROVIDER on DEVICE"), prepared in this process; the environment is the server's (DLGUIDE_HOME's export
    is reused, not redone)."""
    from dlguide_core.booth import variant_label
    from dlguide_core.inference import names, registry
    from dlguide_core.inference.backend_base import BackendOptions
    from dlguide_core.vision.models import load_model

    loaded = load_model("imagenet")
    label = booth_line.split(" · ")[0]
    for name, ranked in names.ranking():
        options = BackendOptions(target=ranked.target, precision=ranked.precision)
        if name == names.BASELINE:
            options = BackendOptions()
        want = names.label(name, ranked.target) + ("" if ranked.precision == "fp32" else f" {ranked.precision}")
        if want == label or (name == names.BASELINE and label == names.label(name)):
            if not registry.backend_class(name).availability(options).available:
                continue  # a label two targets share ("ONNX Runtime" on the GPU and the CPU): the one that runs here
            backend = registry.prepare_backend(name, loaded, options=options)
            return variant_label(backend), backend, loaded
    return label, None, loaded


def time_forward(backend, loaded, size: int, runs: int, warmup: int = 0) -> dict[str, float]:
    """`runs` forwards of a batch of `size` (after `warmup`): CPU ms per image (process CPU, all threads), the
    batch's wall ms, images/s."""
    from dlguide_core.inference.backend_base import sample_batch

    batch = sample_batch(loaded, size)
    for _ in range(warmup):
        backend.run(batch)
    if not runs:
        return {}
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(runs):
        backend.run(batch)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_ms_per_image": cpu * 1000 / (runs * size), "batch_wall_ms": wall * 1000 / runs,
            "images_per_s": runs * size / wall}


WARMUP_RUNS = 5


def forward_cpu(booth_line: str, batch_histogram: dict[str, int], iters: int = 8, batch1_iters: int = 60,
                prepared=None) -> dict:
    """The booth backend's own forward, in this process with the server stopped: CPU ms per image (process CPU,
    all threads) and images/s at batch 1 (`batch1_iters` forwards in three blocks, the median block; single blocks
    of 8 read 90-165 ms for the same int8 forward here) and at each batch size the server ran (three blocks of
    `iters`, the median block), after WARMUP_RUNS at each shape, plus the images/s it does alone at the batch sizes
    the server formed (its histogram weighted).
    `prepared`: booth_backend's answer, when this process has it already."""
    label, backend, loaded = prepared or booth_backend(booth_line)
    if backend is None:
        return {"backend": label, "error": "not matched"}
    sizes = sorted({1, *(int(b) for b in batch_histogram)})
    rows: dict[str, dict] = {}
    for size in sizes:
        time_forward(backend, loaded, size, 0, warmup=WARMUP_RUNS)  # at this shape: the first runs allocate
        blocks = sorted((time_forward(backend, loaded, size, batch1_iters // 3 if size == 1 else iters)
                         for _ in range(3)), key=lambda block: block["cpu_ms_per_image"])
        rows[str(size)] = {**blocks[len(blocks) // 2],
                           "cpu_ms_per_image_blocks": [round(b["cpu_ms_per_image"], 1) for b in blocks]}
    counts = {b: n / int(b) for b, n in batch_histogram.items()}  # batches run, from answers per batch size
    images, seconds = (sum(c * int(b) for b, c in counts.items()),
                       sum(c * rows[b]["batch_wall_ms"] / 1000 for b, c in counts.items()))
    return {"backend": label, "by_batch": rows, "alone_images_per_s_at_formed_batches":
            images / seconds if seconds else rows["1"]["images_per_s"]}


def gpu_utilisation() -> float | None:
    """The busiest GPU's utilisation now (nvidia-smi, else amd-smi/rocm-smi), None where there is none."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        values = [float(v) for v in out.split() if v.replace(".", "", 1).isdigit()]
        return max(values) if values else None
    from dlguide_core.smi import smi_readings

    values = [r.utilisation_percent for r in smi_readings() if r.utilisation_percent is not None]
    return max(values) if values else None


def sample_gpu(samples: list[float], done: threading.Event, every_s: float = 0.5) -> None:
    while not done.wait(every_s):
        value = gpu_utilisation()
        if value is None:
            return  # no GPU tool here
        samples.append(value)


def sample_rss(server: psutil.Process, samples: list[int], done: threading.Event, every_s: float = 1.0) -> None:
    while not done.wait(every_s):
        samples.append(server.memory_info().rss)


def serve(port: int, env: dict[str, str], log=subprocess.DEVNULL) -> subprocess.Popen:
    sys.path.insert(0, str(ROOT))
    import serve  # the launcher: `make kiosk`'s command line, only the port and the environment differ

    proc = subprocess.Popen(serve.command(port), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", **env})
    try:  # the launcher prepares the booth (ONNX export) before opening the port
        serve.wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=1800)
    except (RuntimeError, TimeoutError):
        proc.kill()
        raise
    return proc


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server `serve` started: TERM, then KILL after 30 s (on a loaded box the report counts, not a graceful
    exit)."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def ready_line(log_path: Path) -> str | None:
    """What served the visitors: the launcher's "booth ready in N s: BACKEND · PROVIDER on DEVICE" line's
    "BACKEND · PROVIDER on DEVICE", None before it is written."""
    ready = [line for line in log_path.read_text(errors="replace").splitlines() if "booth ready" in line]
    return ready[0].split("booth ready in", 1)[1].split(": ", 1)[-1] if ready else None


def probe_forward(backend, loaded) -> float:
    """The batch-1 forward's CPU ms per image now: the median of three blocks of 10."""
    blocks = sorted(time_forward(backend, loaded, 1, 10)["cpu_ms_per_image"] for _ in range(3))
    return blocks[1]


def kept_weights(home: Path, weights_env) -> dict[str, str]:
    """`weights_env` once per DLGUIDE_HOME: a kept --home reuses its stand-in weights (and so its export)."""
    if (home / "torch_home").is_dir():
        return {"TORCH_HOME": str(home / "torch_home")}
    return weights_env(home)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--single-rounds", type=int, default=20)
    parser.add_argument("--backend", default=None,
                        help="DLGUIDE_KIOSK_BACKEND for the served booth (default: the environment's, else auto)")
    parser.add_argument("--home", default=None,
                        help="DLGUIDE_HOME to use and keep (its ONNX export is reused by the next run); default a "
                             "fresh temporary one")
    parser.add_argument("--think-s", type=float, default=0.0,
                        help="each concurrent visitor looks at an answer for about this long before the next photo "
                             "(0.5-1.5x, drawn; default 0: a crowd that never stops, the saturation test)")
    parser.add_argument("--no-forward", action="store_true",
                        help="skip timing the backend's own forward after the server stops")
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_first_visit import weights_env  # TORCH_HOME's ImageNet file, else a stand-in of the same shape

    with tempfile.TemporaryDirectory() as scratch:
        home = args.home or scratch
        Path(home).mkdir(parents=True, exist_ok=True)
        env = {"DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": home, "DLGUIDE_OFFLINE": "1",
               **kept_weights(Path(home), weights_env)}
        if args.backend:
            env["DLGUIDE_KIOSK_BACKEND"] = args.backend
        log_path = Path(home) / "server.log"
        prepared = None
        with log_path.open("wb") as log:
            proc = serve(port, env, log=log)
            try:
                probe = None
                booth_line = ready_line(log_path)
                if booth_line and not args.no_forward:  # the booth's backend, here too: timed around each phase
                    os.environ.update(env)  # the server's weights and DLGUIDE_HOME: its export is reused
                    prepared = booth_backend(booth_line)
                    if prepared[1] is not None:
                        _, backend, loaded = prepared
                        time_forward(backend, loaded, 1, 0, warmup=WARMUP_RUNS)
                        probe = functools.partial(probe_forward, backend, loaded)
                report = run_load(f"http://127.0.0.1:{port}", proc.pid, sessions=args.sessions, rounds=args.rounds,
                                  single_rounds=args.single_rounds, think_s=args.think_s, probe=probe)
            finally:
                stop_server(proc)
        booth_line = ready_line(log_path)
        report["booth"] = booth_line or "unknown (no 'booth ready' line in the log)"
        if booth_line and not args.no_forward:
            os.environ.update(env)  # the server's weights and DLGUIDE_HOME: its export is reused, not redone
            report["forward"] = forward_cpu(booth_line, report["batch_histogram"] or {"1": 1}, prepared=prepared)
            fwd = report["forward"].get("by_batch", {}).get("1", {}).get("cpu_ms_per_image")
            if fwd is not None:
                report["server_cpu_minus_forward_ms"] = report["server_cpu_per_classification_s"] * 1000 - fwd
                report["single_server_cpu_minus_forward_ms"] = (
                    report["single_server_cpu_per_classification_s"] * 1000 - fwd)
    print(json.dumps({**report, "errors": report["errors"][:10]}, indent=2))
    return 0 if not report["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())

