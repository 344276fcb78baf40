"""AppTest of the booth page: kiosk routing, the visitor's screen and what it is given, and the read-only training
ticker. The visitor's flow itself (a photo, its answer, the heat map, "Start over", idle) runs in the browser and over
the booth's HTTP route: tests/served/test_kiosk.py and tests/served/test_booth_api.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.paths import ROOT


def booth(monkeypatch: pytest.MonkeyPatch, kiosk: bool = True, backend: str = "torch") -> AppTest:
    """The app in kiosk mode; eager PyTorch unless asked, so most tests skip the one-time ONNX export."""
    monkeypatch.setenv("DLGUIDE_KIOSK_BACKEND", backend)
    if kiosk:
        monkeypatch.setenv("DLGUIDE_KIOSK", "1")
    monkeypatch.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    return at.run() if kiosk else at.run().switch_page("pages/booth.py").run()


def all_text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [t.value for t in at.title] + [c.value for c in at.caption]
    parts += [w.value for w in at.warning] + [s.value for s in at.subheader] + [h.value for h in at.get("html")]
    return "\n".join(str(p) for p in parts)


def screen(at: AppTest) -> dict:
    """What the page hands the visitor's screen (ui.booth.screen_data), as the browser receives it."""
    import json

    (element,) = [e for e in at.get("bidi_component") if e.key == "kiosk_screen"]
    assert element.proto.component_name == "dlguide_booth_screen"
    return json.loads(element.proto.json)


def widget_keys(at: AppTest) -> set[str]:
    kinds = ("button", "selectbox", "toggle", "slider", "text_input", "file_uploader", "camera_input",
             "segmented_control", "checkbox", "number_input", "radio", "multiselect")
    return {w.key for kind in kinds for w in getattr(at, kind) if w.key}


def test_kiosk_mode_routes_only_the_booth(monkeypatch: pytest.MonkeyPatch) -> None:
    at = booth(monkeypatch)
    assert not at.exception
    assert at.title[0].value == "What does the AI see?"
    keys = widget_keys(at)
    assert keys <= {"kiosk_job"}, keys  # no weights picker, no training controls (the screen's are the browser's)
    assert "classify_weights" not in keys
    text = all_text(at)
    assert "untrained" in text  # no ImageNet weights here: the banner says so
    assert "/" not in at.warning[0].value  # and names no file path
    data = screen(at)  # the attract view: each bundled sample with its top-5, inline
    assert len(data["attract"]) == 2 and all(len(item["top"]) == 5 for item in data["attract"])
    assert all(item["src"].startswith("data:image/jpeg;base64,") for item in data["attract"])
    assert data["api"] == "/_booth" and data["crop"] == 299 and data["classes"] == 1000
    assert "untrained" in data["texts"]["heatmap"]  # its heat map claims nothing


@pytest.mark.parametrize("hidden", ["pages/devices.py", "pages/classify.py"])
def test_kiosk_mode_registers_no_other_page(monkeypatch: pytest.MonkeyPatch, hidden: str) -> None:
    """st.navigation routes only pages in its list: in kiosk mode that list is the booth alone (at "/" and /kiosk)."""
    at = booth(monkeypatch)
    with pytest.raises(ValueError, match=r"Known pages: \['[^']*pages/booth\.py', '[^']*pages/booth\.py'\]"):
        at.switch_page(hidden)


def test_kiosk_mode_ignores_page_query_params(monkeypatch: pytest.MonkeyPatch) -> None:
    at = booth(monkeypatch)
    at.query_params["page"] = "devices"
    at.query_params["weights"] = "/etc/passwd"
    at.run()
    assert not at.exception
    assert at.title[0].value == "What does the AI see?"
    assert all(k.startswith("kiosk_") for k in widget_keys(at))


def test_the_screen_is_drawn_once_and_the_page_has_no_timer(monkeypatch: pytest.MonkeyPatch,
                                                             fake_imagenet: Path) -> None:
    """Issue 30: the visitor's screen is one element, given everything it shows once; the page declares no timer of
    its own (no attract view, countdown or idle check run in the server: an idle tab costs it nothing)."""
    monkeypatch.setenv("DLGUIDE_KIOSK_IDLE_S", "12")
    at = booth(monkeypatch)
    assert not at.exception
    assert "untrained" not in all_text(at)  # ImageNet weights are cached: no banner
    data = screen(at)
    assert data["texts"]["metrics"] == ["This prediction took", "Ran on", "Backend"]
    assert data["device"].startswith(("CPU", "GPU")) and data["backend"].startswith("PyTorch (eager)")
    assert data["texts"]["heatmap"] == "Grad-CAM for “{label}”: red is where it looked"
    assert data["texts"]["idle"] == "This screen clears itself 12 s after your last tap."
    assert data["accept"] == ".jpg,.jpeg,.png,.webp,.bmp,.gif" and data["max_mb"] == 25
    assert widget_keys(at) <= {"kiosk_job"}  # no camera, uploader, toggle or button widget: the browser has them


def test_normal_mode_also_serves_the_booth(monkeypatch: pytest.MonkeyPatch) -> None:
    at = booth(monkeypatch, kiosk=False)
    assert not at.exception
    assert at.title[0].value == "What does the AI see?"


def test_no_job_store_is_created(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    from dlguide_core.jobs.store import db_path

    at = booth(monkeypatch)
    assert "No model is training right now." in all_text(at)
    assert "Meanwhile" not in all_text(at)  # no heading over nothing
    assert not db_path(isolated_home).exists()


def test_training_ticker_shows_a_running_jobs_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    from dlguide_core.jobs.store import JobStore

    store = JobStore()
    job = store.create("inception_v3_finetune", "pytorch", {"epochs": 1})
    store.claim(job.id, os.getpid())  # this process stands in for the job's
    store.add_steps([(job.id, step, 0, 2.0 / step, 0.1, 10.0, float(step), "{}") for step in range(1, 6)])
    store.create("cifar_net", "pytorch", {"epochs": 1})  # queued: not offered
    damaged = store.create("cifar_net", "pytorch", {"epochs": 1})  # a running row whose config is not JSON:
    store.claim(damaged.id, os.getpid())  # skipped, never "This app has encountered an error" (issue 33)
    with store.db.transaction() as db:
        db.execute("UPDATE jobs SET config = '{not json' WHERE id = ?", (damaged.id,))
    at = booth(monkeypatch)
    assert not at.exception
    assert not at.selectbox  # one run: no picker, its name in the curve's title (a name, not a job id)
    (title,) = [m.value for m in at.html if "how wrong the model still is" in m.value]
    assert title.startswith("<p><b>inception_v3_finetune, started ") and job.id not in title
    store.rename(job.id, "Inception v3 learns 10 animals", [])
    at.run()
    assert any(m.value.startswith("<p><b>Inception v3 learns 10 animals</b>: how wrong") for m in at.html)
    store.rename(job.id, "[win](https://evil.example) ![x](https://evil.example/x.png) :red[<i>hi</i>]", [])
    at.run()  # N6: a name is text to strangers, never Markdown or HTML
    (title,) = [m.value for m in at.html if "how wrong" in m.value]
    assert "[win](https://evil.example) ![x](https://evil.example/x.png) :red[&lt;i&gt;hi&lt;/i&gt;]" in title
    assert not [m for m in at.markdown if "evil.example" in m.value]
    store.rename(job.id, "Inception v3 learns 10 animals", [])
    other = store.create("cifar_net", "pytorch", {"epochs": 1}, name="CIFAR from scratch")
    store.claim(other.id, os.getpid())
    assert at.run().selectbox(key="kiosk_job").options == ["CIFAR from scratch", "Inception v3 learns 10 animals"]
    keys = widget_keys(at)
    assert all(k.startswith("kiosk_") for k in keys)  # read-only: no cancel/resume controls
    assert store.get(job.id).status == "running"


@pytest.mark.usefixtures("isolated_home")
def test_the_tickers_curve_is_one_downsampled_read_for_every_tab() -> None:
    """A long run's ticker costs what a short one's does: every open booth tab redraws it every 5 s, and each used
    to read and draw every step (1.3-2.1 % of a core per idle tab beside a training job, issue 30)."""
    from dlguide_core.jobs.store import JobStore
    from dlguide_core.jobs.store_url import store_url
    from ui.cache import TICKER_POINTS, ticker_curve

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 1})
    store.claim(job.id, os.getpid())
    losses = [2.0 / step for step in range(1, 5001)]
    losses[3000] = 9.0  # a spike survives the downsampling (min and max per bucket)
    store.add_steps([(job.id, step, 0, losses[step - 1], 0.1, 10.0, float(step), "{}") for step in range(1, 5001)])
    steps, curve = ticker_curve(store_url().raw, job.id)
    assert len(steps) == len(curve) <= TICKER_POINTS and steps == sorted(steps)
    assert steps[0] == 1 and steps[-1] >= 4990 and max(curve) == 9.0


@pytest.mark.slow
def test_default_backend_is_the_fastest_available(monkeypatch: pytest.MonkeyPatch, booth_home: Path) -> None:
    """As on a restart of `make kiosk`: the export, int8 model and MIGraphX program are cached (booth_home), and
    the booth still loads and times each contender before it picks."""
    from dlguide_core.inference import choice, registry
    from dlguide_core.vision.models import load_model

    monkeypatch.delenv("DLGUIDE_KIOSK_BACKEND", raising=False)
    # zentorch would compile Inception for minutes to be timed; its turn: tests/inference/test_backend_zentorch.py
    monkeypatch.setitem(sys.modules, "zentorch", None)
    at = booth(monkeypatch, backend="")
    assert not at.exception
    expected = registry.backend_class(choice.fastest_available(load_model("imagenet")).name).title
    assert screen(at)["backend"].startswith(expected)


def test_unknown_backend_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    at = booth(monkeypatch, backend="warp-drive")
    assert not at.exception
    assert "DLGUIDE_KIOSK_BACKEND" in at.error[0].value and "\n" not in at.error[0].value


@pytest.mark.parametrize("page", ["classify.py", "train.py", "devices.py", "compiled.py"])
def test_a_hidden_page_run_directly_in_kiosk_mode_renders_nothing(monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    """Defence in depth: even a route around app.py's navigation shows no training, paths or devices."""
    monkeypatch.setenv("DLGUIDE_KIOSK", "1")
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=60).run()
    assert not at.exception
    assert [i.value for i in at.info] == ["This page is not available in booth mode."]
    assert not at.title and not at.button and not at.selectbox and not at.dataframe
