"""The booth's server CPU per classification with real browsers (issue 30's independent check): N headless Debian
chromium visitors at once against a booth started as `make kiosk` starts it (serve.command, DLGUIDE_KIOSK=1), each
uploading photos in turn (Upload, the photo, wait for the answer, "Start over"), as a visitor's screen does it (the
photo over the booth's HTTP route, the answer drawn in the browser: ui/booth_screen.js).

Reported: classifications, errors, the server's CPU (every process of it) over the measured phase per
classification, the booth backend's own forward CPU at batch 1 (timed in this process just before and after the
crowd, same weights and DLGUIDE_HOME: tests/support/booth_forward.py) and the difference, the answers' batch sizes
and the visitors' waits.

    .venv/bin/python -m bench.bench_booth_browsers [--visitors 5] [--rounds 6] [--home DIR]
"""

from __future__ import annotations

import asyncio
import functools
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from PIL import Image

from bench.common import parser, report, result, skip
from tests.support.accounting import cpu_s, percentile
from tests.support.booth_forward import (
    WARMUP_RUNS,
    booth_backend,
    kept_weights,
    probe_forward,
    ready_line,
    time_forward,
)
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.servers import start_served
from tests.support.visitors import ANSWERED, BATCH_NOTE, PHOTO_INPUT, START_OVER, UPLOAD_TAB

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


async def crowd(url: str, pid: int, visitors: int, rounds: int, workdir: Path, probe=None,
                calm_s: float = 2.0) -> dict:
    from playwright.async_api import async_playwright

    server = psutil.Process(pid)
    waits: list[float] = []
    batches: list[int] = []
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await launch(pw.chromium)
        ready, go = asyncio.Barrier(visitors + 1), asyncio.Event()
        tasks = [asyncio.create_task(visitor(browser, url, v, rounds, workdir, waits, batches, errors, ready, go))
                 for v in range(visitors)]
        await asyncio.wait_for(ready.wait(), timeout=600)  # every tab on the attract view
        await asyncio.sleep(calm_s)  # the tabs' own first runs end
        probes = [probe()] if probe else []
        cpu, start = cpu_s(server), time.perf_counter()
        go.set()
        await asyncio.gather(*tasks)
        cpu, wall = cpu_s(server) - cpu, time.perf_counter() - start
        await browser.close()
        probes += [probe()] if probe else []
    done = len(waits)
    return {"visitors": visitors, "rounds": rounds, "classifications": done, "errors": errors,
            "wall_s": wall, "classifications_per_s": done / wall if wall else 0.0,
            "server_cpu_per_classification_ms": cpu * 1000 / done if done else float("nan"),
            "wait_p50_s": percentile(waits, 50), "wait_p95_s": percentile(waits, 95),
            "batch_histogram": {str(b): batches.count(b) for b in sorted(set(batches))},
            "forward_probes_ms": [round(p, 1) for p in probes]}


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--visitors", type=int, default=5)
    args.add_argument("--rounds", type=int, default=6)
    args.add_argument("--home", default=None, help="DLGUIDE_HOME to use and keep (its ONNX export is reused)")
    args.add_argument("--backend", default=None, help="DLGUIDE_KIOSK_BACKEND (default: the booth's own choice; "
                                                      "--quick: PyTorch eager, which needs no export)")
    ns = args.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    if ns.quick:  # one browser visitor, one photo, on the eager backend
        from dlguide_core.inference.specs import BASELINE

        ns.visitors, ns.rounds, ns.backend = 1, 1, ns.backend or BASELINE
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(ns.home or scratch)
        home.mkdir(parents=True, exist_ok=True)
        env = {"DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": str(home), "DLGUIDE_OFFLINE": "1",
               "MALLOC_ARENA_MAX": "2", **kept_weights(home)}
        if ns.backend:
            env["DLGUIDE_KIOSK_BACKEND"] = ns.backend
        log_path = home / "server.log"
        server = start_served(log_path, env, timeout=1800)
        try:
            probe, booth_line = None, ready_line(log_path)
            if booth_line and not ns.quick:  # the booth's backend, in this process: timed around the crowd
                os.environ.update(env)
                _, backend, loaded = booth_backend(booth_line)
                if backend is not None:
                    time_forward(backend, loaded, 1, 0, warmup=WARMUP_RUNS)
                    probe = functools.partial(probe_forward, backend, loaded)
            figures = asyncio.run(crowd(server.url, server.proc.pid, ns.visitors, ns.rounds, Path(scratch), probe,
                                        0.5 if ns.quick else 2.0))
        finally:
            server.stop()
        figures["booth"] = ready_line(log_path) or "unknown"
        if figures["forward_probes_ms"]:  # the forward as this machine ran it around the crowd (its speed drifts)
            forward = sum(figures["forward_probes_ms"]) / len(figures["forward_probes_ms"])
            figures["server_cpu_minus_forward_ms"] = figures["server_cpu_per_classification_ms"] - forward
        figures["loadavg_1min"] = os.getloadavg()[0]
    report(result("bench_booth_browsers", figures), ns.json)
    return 0 if not figures["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
