"""A hostile job store (issue 18.6): corrupt files, DLGUIDE_HOME a file, a read-only home, a full disk.

Each gives one clear line (what, where, what to do) and exit 2 in the CLI, and loses nothing; a
read-only store is still listed, shown and exported. The inputs are generated here. Read-only and
full disks are real mounts (a small tmpfs), so those tests need root.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from dlguide_core.cli.main import main
from dlguide_core.errors import CheckpointError, StoreError
from dlguide_core.jobs.store import JobStore
from dlguide_core.jobs.store_sink import StoreSink
from dlguide_core.vision.checkpoints import load_checkpoint, save_checkpoint
from tests.support.apptest import open_app
from tests.support.checkpoints import toy_checkpoint


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _store_with_a_job(steps: int = 10) -> tuple[JobStore, str]:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 1})
    store.add_steps([(job.id, s, 0, 1.0 / s, 0.1, 10.0, 1000.0 + s, None) for s in range(1, steps + 1)])
    store.add_epoch(job.id, 0, {"train_loss": 0.5, "top1": 50.0})
    return store, job.id


def _corruptions() -> Iterator[tuple[str, bytes | None]]:
    rng = random.Random(18)
    yield "random bytes", bytes(rng.randrange(256) for _ in range(8192))
    yield "a text file", b"these are my notes, not a database\n" * 40
    yield "an image", (Path(__file__).resolve().parents[2] / "dlguide_core" / "samples" / "chelsea.jpg").read_bytes()
    yield "a store cut in half", None  # made from a real store below
    yield "a store with its header overwritten", None


@pytest.mark.parametrize("kind", [name for name, _ in _corruptions()])
def test_a_corrupt_store_is_one_line_exit_2_and_left_as_it_was(kind: str, isolated_home: Path, capsys) -> None:
    data = dict(_corruptions())[kind]
    db = isolated_home / "jobs.db"
    if data is None:
        store, _ = _store_with_a_job(steps=3000)
        store.db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        whole = db.read_bytes()
        data = whole[: len(whole) // 2] if "half" in kind else b"\0" * 100 + whole[100:]
    isolated_home.mkdir(parents=True, exist_ok=True)
    db.write_bytes(data)
    for argv in (("jobs", "list"), ("jobs", "show", "x", "--json"), ("store", "info", "--json")):
        code, out, err = _cli(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert str(db) in err and ("move it aside" in err or "restore" in err), err
    assert db.read_bytes() == data and not list(isolated_home.glob("jobs.db.bak-*"))


def test_dlguide_home_pointing_at_a_file_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    monkeypatch.setenv("DLGUIDE_HOME", str(home))
    code, out, err = _cli(capsys, "jobs", "list")
    assert code == 2 and err.count("\n") == 1 and str(home) in err and "point DLGUIDE_HOME at a folder" in err
    assert home.read_text() == "not a folder"


@pytest.fixture
def small_mount() -> Iterator[Path]:
    """A fresh 2 MiB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("read-only and full-disk stores are tested on a real tmpfs mount: run as root")
    where = Path(tempfile.mkdtemp(prefix="dlguide-mount-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def test_a_read_only_home_still_lists_shows_and_exports(small_mount: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DLGUIDE_HOME", str(small_mount))
    store, job_id = _store_with_a_job()
    store.close()
    subprocess.run(["mount", "-o", "remount,ro", str(small_mount)], check=True)
    code, out, err = _cli(capsys, "jobs", "list", "--json")
    assert code == 0, err
    assert [j["id"] for j in json.loads(out)] == [job_id]
    code, out, err = _cli(capsys, "jobs", "show", job_id, "--json")
    assert code == 0 and json.loads(out)["last_step"]["step"] == 10, err
    code, out, err = _cli(capsys, "jobs", "export", job_id, "--csv")
    assert code == 0 and len(out.splitlines()) == 11, err
    code, out, err = _cli(capsys, "jobs", "cancel", job_id)
    assert code == 2 and err.count("\n") == 1 and "is read-only" in err and str(small_mount) in err


def test_a_full_disk_is_one_line_and_loses_nothing(small_mount: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DLGUIDE_HOME", str(small_mount))
    store, job_id = _store_with_a_job()
    sink = StoreSink(store.url, job_id, flush_s=0.05)
    filler = small_mount / "filler"
    with open(filler, "wb", buffering=0) as fh:  # fill the disk to the last block
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    rows = [(job_id, s, 0, 1.0, 0.1, 10.0, 2000.0 + s, "x" * 200) for s in range(11, 5000)]
    with pytest.raises(StoreError, match=f"no space left on the device holding {small_mount}"):
        store.add_steps(rows)
    for step in range(11, 200):  # the training loop goes on while the disk is full
        sink.on_step(step, 0, 1.0, 0.1, 10.0)
    sink.flush()
    time.sleep(0.3)
    assert store.steps(job_id)["step"] == list(range(1, 11))  # what was there is still there
    filler.unlink()
    sink.close()  # the buffered steps go in once there is room
    assert store.steps(job_id)["step"] == list(range(1, 200))


def test_a_checkpoint_that_does_not_fit_says_so_and_the_previous_one_loads(small_mount: Path) -> None:
    path = toy_checkpoint(small_mount / "job" / "checkpoint.pt", ("a", "b"))  # a real one, that fits
    before = load_checkpoint(path)
    with pytest.raises(CheckpointError, match=f"no space left on the device holding {path.parent}"):
        save_checkpoint(path, before | {"model": {"w": torch.zeros(2_000_000)}})  # 8 MB on a 2 MiB disk
    after = load_checkpoint(path)  # validated as every checkpoint is (vision.checkpoints)
    assert after["class_names"] == ["a", "b"] and after["model"].keys() == before["model"].keys()
    assert all(torch.equal(after["model"][k], before["model"][k]) for k in before["model"])
    assert [p.name for p in path.parent.iterdir()] == ["checkpoint.pt"]  # no temp file left behind


def test_the_train_page_shows_the_store_problem_in_one_line(isolated_home: Path) -> None:
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "jobs.db").write_bytes(b"these are my notes, not a database\n" * 40)
    at = open_app("pages/train.py")
    assert not at.exception, at.exception
    assert any("not a readable job store" in e.value for e in at.error), [e.value for e in at.error]


def test_the_booth_goes_on_without_its_ticker_when_the_store_is_unusable(isolated_home: Path, monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.support.paths import ROOT

    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "jobs.db").write_bytes(b"\x00garbage" * 512)
    monkeypatch.setenv("DLGUIDE_KIOSK", "1")
    monkeypatch.setenv("DLGUIDE_KIOSK_BACKEND", "torch")
    monkeypatch.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "No model is training right now." in [c.value for c in at.caption]
    assert at.title[0].value == "What does the AI see?"  # the booth itself is there


def test_openers_of_a_new_store_at_the_same_instant_all_get_it(tmp_path: Path) -> None:
    """Found by a CI run (issue 18, a store's first second): switching a new file to WAL does not wait on SQLite's
    busy timeout, so a second opener of a store another one was creating failed at once with "stayed locked for
    30 s" (2 of 40 tries with three openers). Each round: four threads open one brand-new store together."""
    import threading

    from dlguide_core.jobs.store import open_store

    failures: list[str] = []
    for attempt in range(60):
        path = tmp_path / f"jobs-{attempt}.db"
        barrier = threading.Barrier(4)

        def open_it(path: Path = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                open_store(path).list_jobs(refresh=False)
            except StoreError as exc:
                failures.append(str(exc))

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
