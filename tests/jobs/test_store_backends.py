"""The store's guarantees on SQLite and on PostgreSQL: claims race across processes, a foreground job is
never stolen, the URL's password never shows, and a PostgreSQL outage loses no step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from dlguide_core.errors import StoreError
from dlguide_core.jobs import queue
from dlguide_core.jobs.store import JobStore
from dlguide_core.jobs.store_sink import StoreSink
from dlguide_core.training.recipes import get_recipe
from tests.support.paths import ROOT
from tests.support.waiting import wait_for

DISPATCHER = """
import json, pathlib, sys, time
from dlguide_core.jobs.store import JobStore
store, claimed, done, until = JobStore(), [], pathlib.Path(sys.argv[1]), time.time() + 300
print("ready", flush=True)
while time.time() < until:
    finished = done.exists()  # read before the claim: a job queued before `done` is claimed below
    job = store.claim_next(1000)
    if job is not None:
        claimed.append(job.id)
    elif finished:
        break
    else:
        time.sleep(0.001)
print(json.dumps(claimed), flush=True)
"""


class Dispatchers:
    """Processes claiming in a loop until `stop()`, then until the queue is empty; `stop()` says what each took."""

    def __init__(self, count: int, tmp_path) -> None:
        self.done = tmp_path / "done"
        self.procs = [subprocess.Popen([sys.executable, "-c", DISPATCHER, str(self.done)], cwd=ROOT,
                                       stdout=subprocess.PIPE, text=True) for _ in range(count)]
        for proc in self.procs:
            assert proc.stdout.readline().strip() == "ready"

    def stop(self) -> list[list[str]]:
        self.done.touch()
        return [json.loads(proc.communicate(timeout=120)[0]) for proc in self.procs]


def test_two_dispatchers_never_claim_the_same_job(store_url: str, tmp_path) -> None:
    store = JobStore()
    dispatchers = Dispatchers(2, tmp_path)
    ids = []
    for _ in range(40):  # jobs queued while both dispatchers claim in a loop
        ids.append(store.create("cifar_net", "pytorch", {}).id)
        time.sleep(0.02)
    first, second = dispatchers.stop()
    assert first and second and not set(first) & set(second)
    assert sorted(first + second) == sorted(ids)
    assert all(store.get(i, refresh=False).attempts == 1 for i in ids)


def test_a_foreground_job_is_created_running_and_no_dispatcher_steals_it(store_url: str, tmp_path) -> None:
    """`train` without --detach (issue 18.7): the job is created running in its process, in one transaction."""
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data=str(tmp_path), device="cpu")
    dispatchers = Dispatchers(1, tmp_path)
    mine = [queue.submit(store, "cifar_net", cfg, start=False, claim_pid=os.getpid()) for _ in range(20)]
    for job in mine[:10]:  # `jobs resume ID` in the foreground: back to running in one transaction too
        store.finish(job.id, "cancelled")
        store.prepare_resume(job.id, claim_pid=os.getpid())
    assert dispatchers.stop() == [[]]
    assert {store.get(j.id, refresh=False).pid for j in mine} == {os.getpid()}
    assert all(j.status == "running" and j.attempts == 1 for j in mine)
    assert [store.get(j.id, refresh=False).attempts for j in mine] == [2] * 10 + [1] * 10


WRITER = """
import sys
from dlguide_core.jobs.store import JobStore
from dlguide_core.jobs.store_sink import StoreSink
sink = StoreSink(None, sys.argv[1], flush_s=0.05)
for step in range(1, 1_000_000):
    sink.on_step(step, 0, 1.0, 0.1, 10.0)
    if step % 7 == 0:
        sink.flush()  # the loop's flush(): every step so far is committed when it returns
        print(step, flush=True)
"""


def test_kill_9_of_a_writer_loses_no_acknowledged_step(store_url: str) -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    writer = subprocess.Popen([sys.executable, "-c", WRITER, job.id], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    acked = 0
    while acked < 200:
        acked = int(writer.stdout.readline())
    writer.kill()
    writer.wait(timeout=30)
    stored = store.steps(job.id)["step"]
    assert stored[:acked] == list(range(1, acked + 1))  # every acknowledged step, in order, no gap


def test_the_password_never_shows_in_errors_or_info(postgres_server, monkeypatch) -> None:
    url = postgres_server.create_database()
    wrong = url.replace(postgres_server.password, "not-the-password")
    monkeypatch.setenv("DLGUIDE_STORE_URL", wrong)
    done = subprocess.run([sys.executable, "-m", "dlguide_core", "jobs", "list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "not-the-password" not in done.stderr and "dlguide_test:***@127.0.0.1" in done.stderr
    monkeypatch.setenv("DLGUIDE_STORE_URL", url)
    JobStore().create("cifar_net", "pytorch", {})
    info = subprocess.run([sys.executable, "-m", "dlguide_core", "store", "info", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert json.loads(info.stdout) == {"backend": "postgresql", "url": url.replace(postgres_server.password, "***"),
                                       "schema_version": 3, "jobs": 1}
    assert postgres_server.password not in repr(JobStore().url) + str(JobStore().url)


@pytest.mark.slow
def test_a_postgresql_outage_mid_run_loses_no_step_and_readers_recover(postgres_server, monkeypatch) -> None:
    url = postgres_server.create_database()
    monkeypatch.setenv("DLGUIDE_STORE_URL", url)
    store, reader = JobStore(), JobStore()
    job = store.create("cifar_net", "pytorch", {})
    sink = StoreSink(store.url, job.id, flush_s=0.05)
    stepped, errors = [], []

    def train(last: int) -> None:  # the training loop: on_step and flush must never raise
        try:
            for step in range(len(stepped) + 1, last + 1):
                sink.on_step(step, step // 100, 1.0 / step, 0.1, 50.0)
                stepped.append(step)
                if step % 50 == 0:
                    sink.flush()
                    sink.on_checkpoint(job.job_dir / "checkpoint.pt", step=step, epoch=step // 100)
                time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    train(100)
    wait_for(lambda: (reader.last_step(job.id) or {}).get("step") == 100, timeout=30)
    postgres_server.stop_server()
    try:
        # a resumed run starting at step 100 while the store is away: its trim must stay before its new steps
        sink.on_start(total_steps=400, epochs=4, class_names=("a", "b"), start_step=100, start_epoch=1)
        loop = threading.Thread(target=train, args=(300,))
        loop.start()
        with pytest.raises(StoreError, match=r"unreachable") as away:
            reader.steps(job.id)
        assert postgres_server.password not in str(away.value) and "***" in str(away.value)
        loop.join(timeout=60)
    finally:
        postgres_server.start_server()
    train(400)
    sink.close()
    assert errors == [] and stepped == list(range(1, 401))
    assert reader.steps(job.id)["step"] == list(range(1, 401))  # the same reader object, reconnected
    assert reader.get(job.id, refresh=False).checkpoint_step == 400
    assert reader.get(job.id, refresh=False).total_steps == 400


def test_psycopg_is_imported_only_for_a_postgresql_url(store_url: str) -> None:
    probe = ("import runpy, sys; sys.argv = ['dlguide_core', 'jobs', 'list']\n"
             "try:\n    runpy.run_module('dlguide_core', run_name='__main__')\n"
             "except SystemExit:\n    pass\nprint('psycopg' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == str(store_url.startswith("postgresql"))


@pytest.mark.slow
def test_the_train_page_shows_an_outage_in_one_line_and_recovers_without_restart(postgres_server, monkeypatch) -> None:
    from tests.support.apptest import open_app

    url = postgres_server.create_database()
    monkeypatch.setenv("DLGUIDE_STORE_URL", url)
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, os.getpid())  # running, in this live process: the page's dispatcher starts no process
    at = open_app("pages/train.py")
    assert not at.exception and list(at.dataframe[0].value["job"]) == [job.id]
    postgres_server.stop_server()
    try:
        at.run()
        assert not at.exception, at.exception
        shown = [e.value for e in at.error]
        assert any("unreachable" in e and "dlguide_test:***@127.0.0.1" in e for e in shown), shown
        assert not any(postgres_server.password in e for e in shown)
    finally:
        postgres_server.start_server()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert list(at.dataframe[0].value["job"]) == [job.id]
    store.close()
