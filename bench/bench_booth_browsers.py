"""The booth's server CPU per classification with real browsers (issue 30's independent check): N headless Debian
chromium visitors at once against a booth started as `make kiosk` starts it (serve.command, DLGUIDE_KIOSK=1), each
uploading photos in turn (Upload, the photo, wait for the answer, "Start over"), as a visitor's screen does it (the
photo over the booth's HTTP route, the answer drawn in the browser: ui/booth_screen.js).

Reported: classifications, errors, the server's CPU (every process of it) over the measured phase per
classification, the booth backend's own forward CPU at batch 1 (timed in this process just before and after the
crowd, same weights and DLGUIDE_HOME: bench_kiosk_load.probe_forward) and the difference, the answers' batch sizes
and the visitors' waits.

    .venv/bin/python bench/bench_booth_browsers.py [--visitors 5] [--rounds 6] [--home DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_first_visit import free_port, weights_env  # noqa: E402
from bench_kiosk_load import (  # noqa: E402
    ANSWERED,
    BATCH_NOTE,
    PHOTO_INPUT,
    START_OVER,
    UPLOAD_TAB,
    WARMUP_RUNS,
    booth_backend,
    kept_weights,
    probe_forward,
    ready_line,
    serve,
    server_cpu_s,
    stop_server,
    time_forward,
)
from bench_train_page_idle import CHROMIUM_FLAGS  # noqa: E402

ATTRACT = "Show the camera something"


def photo(seed: int) -> bytes:
    """A distinct photo-like JPEG per round: a bundled sample, shifted and tinted (real photos compress as photos
    do; noise would inflate every picture the booth sends back)."""
    from dlguide_core.vision.samples import bundled_samples

    paths = list(bundled_samples().values())
    rng = np.random.default_rng(seed)
    with Image.open(paths[seed % len(paths)]) as img:
        image = img.convert("RGB")
    w, h = image.size
    dx, dy = int(rng.integers(0, max(1, w // 8))), int(rng.integers(0, max(1, h // 8)))
    pixels = np.asarray(image.crop((dx, dy, w - w // 8 + dx, h - h // 8 + dy)), dtype=np.int16)
    pixels = np.clip(pixels + rng.integers(-12, 13, 3), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


async def visitor(browser, url: str, index: int, rounds: int, workdir: Path, waits: list[float],
                  batches: list[int], errors: list[str], ready: asyncio.Barrier, go: asyncio.Event) -> None:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(300_000)
    broke: list[str] = []  # the page's own errors (a blanked page says why here)
    page.on("pageerror", lambda exc: broke.append(str(exc)[:200]))
    try:
        await page.goto(url)
        await page.get_by_text(ATTRACT).wait_for()
        await ready.wait()
        await go.wait()
        for i in range(rounds):
            path = workdir / f"visitor{index}-{i}.jpg"
            path.write_bytes(photo(1000 * index + i))
            await page.locator(UPLOAD_TAB).click()
            start = time.perf_counter()
            await page.locator(PHOTO_INPUT).set_input_files(str(path))
            await page.get_by_text(ANSWERED).wait_for()
            waits.append(time.perf_counter() - start)
            note = await page.locator(".booth-answer").inner_text()
            batches.extend(int(m.group(1)) for m in BATCH_NOTE.finditer(note))
            await page.locator(START_OVER).click()
            await page.get_by_text(ATTRACT).wait_for()
    except Exception as exc:  # reported, not raised: one visitor's failure must not hide the others
        errors.append(f"visitor {index}: {exc!r}"[:300] + (f"; page errors: {broke[-3:]}" if broke else ""))
        shot_path = workdir.parent / f"booth-browsers-visitor{index}-failed.png"
        try:
            await page.screenshot(path=str(shot_path), full_page=True)
            errors.append(f"visitor {index}: screenshot {shot_path}")
        except Exception:  # noqa: BLE001 - the report matters more than the picture
            pass
    finally:
        await context.close()


async def crowd(url: str, pid: int, visitors: int, rounds: int, chromium: str, workdir: Path, probe=None) -> dict:
    from playwright.async_api import async_playwright

    server = psutil.Process(pid)
    waits: list[float] = []
    batches: list[int] = []
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        ready, go = asyncio.Barrier(visitors + 1), asyncio.Event()
        tasks = [asyncio.create_task(visitor(browser, url, v, rounds, workdir, waits, batches, errors, ready, go))
                 for v in range(visitors)]
        await asyncio.wait_for(ready.wait(), timeout=600)  # every tab on the attract view
        await asyncio.sleep(2)
        probes = [probe()] if probe else []
        cpu, start = server_cpu_s(server), time.perf_counter()
        go.set()
        await asyncio.gather(*tasks)
        cpu, wall = server_cpu_s(server) - cpu, time.perf_counter() - start
        await browser.close()
        probes += [probe()] if probe else []
    done = len(waits)
    return {"visitors": visitors, "rounds": rounds, "classifications": done, "errors": errors,
            "wall_s": wall, "classifications_per_s": done / wall if wall else 0.0,
            "server_cpu_per_classification_ms": cpu * 1000 / done if done else float("nan"),
            "wait_p50_s": float(np.percentile(waits, 50)) if waits else float("nan"),
            "wait_p95_s": float(np.percentile(waits, 95)) if waits else float("nan"),
            "batch_histogram": {str(b): batches.count(b) for b in sorted(set(batches))},
            "forward_probes_ms": [round(p, 1) for p in probes]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--home", default=None, help="DLGUIDE_HOME to use and keep (its ONNX export is reused)")
    parser.add_argument("--backend", default=None, help="DLGUIDE_KIOSK_BACKEND (default: the booth's own choice)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Debian chromium is needed (apt-get install chromium)")
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(args.home or scratch)
        home.mkdir(parents=True, exist_ok=True)
        env = {"DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": str(home), "DLGUIDE_OFFLINE": "1",
               "MALLOC_ARENA_MAX": "2", **kept_weights(home, weights_env)}
        if args.backend:
            env["DLGUIDE_KIOSK_BACKEND"] = args.backend
        log_path = home / "server.log"
        with log_path.open("wb") as log:
            proc = serve(port, env, log=log)
            try:
                probe, booth_line = None, ready_line(log_path)
                if booth_line:  # the booth's backend, in this process: timed just before and after the crowd
                    os.environ.update(env)
                    _, backend, loaded = booth_backend(booth_line)
                    if backend is not None:
                        time_forward(backend, loaded, 1, 0, warmup=WARMUP_RUNS)
                        probe = functools.partial(probe_forward, backend, loaded)
                report = asyncio.run(crowd(f"http://127.0.0.1:{port}", proc.pid, args.visitors, args.rounds,
                                           chromium, Path(scratch), probe))
            finally:
                stop_server(proc)
        report["booth"] = ready_line(log_path) or "unknown"
        if report["forward_probes_ms"]:  # the forward as this machine ran it around the crowd (its speed drifts)
            forward = sum(report["forward_probes_ms"]) / len(report["forward_probes_ms"])
            report["server_cpu_minus_forward_ms"] = report["server_cpu_per_classification_ms"] - forward
        report["loadavg_1min"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))
    return 0 if not report["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
