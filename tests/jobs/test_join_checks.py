"""jobs.join_checks: the ranks of a distributed job check what the writer rank sends them (issue 22), since
c10d's rendezvous lets in whoever reaches it. Unit checks, then a real two-process run in which a rogue process
wins the writer rank and the joining worker refuses its instructions."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest
import torch.multiprocessing as mp

from dlguide_core.errors import DistributedError
from dlguide_core.jobs import worker
from dlguide_core.jobs.join_checks import JOB_ID, check_payload
from dlguide_core.jobs.store import JobStore
from dlguide_core.training import distributed as D
from dlguide_core.training.recipes import get_recipe
from tests.support.ports import free_port

GOOD_ID = "20261124-120000-0123abcd"


def payload(**changes) -> dict:
    cfg = get_recipe("cifar_net").make_config(data="/data/cifar", epochs=1)
    return {"action": "run", "job_id": GOOD_ID, "recipe": "cifar_net", "config": {**cfg.__dict__},
            "resume": False, **changes}


def test_the_store_makes_ids_of_the_checked_shape() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    assert JOB_ID.fullmatch(job.id)


def test_a_good_payload_passes_and_exit_needs_nothing_else(isolated_home) -> None:
    assert check_payload(payload(), None) == payload()
    assert check_payload(payload(), GOOD_ID) == payload()
    assert check_payload({"action": "exit"}, None) == {"action": "exit"}
    weights = isolated_home / "jobs" / GOOD_ID / "checkpoint.pt"
    good = payload(config={**payload()["config"], "weights": str(weights)})
    assert check_payload(good, None) == good


@pytest.mark.parametrize("bad, why", [
    ("not a dict", "not a dlguide worker payload"),
    ({"action": "rm -rf"}, "not a dlguide worker payload"),
    (payload(job_id="../../../tmp/escape"), "is not one dlguide makes"),
    (payload(job_id="20261124-120000-0123abcd/../../x"), "is not one dlguide makes"),
    (payload(job_id=7), "is not one dlguide makes"),
    (payload(recipe="evaluate"), "is not a PyTorch training recipe"),
    (payload(recipe="os:system"), "is not a PyTorch training recipe"),
    (payload(config=[]), "of the wrong type"),
    (payload(resume="yes"), "of the wrong type"),
    (payload(config={**payload()["config"], "weights": "/etc/shadow"}), "outside DLGUIDE_HOME"),
    (payload(config={**payload()["config"], "weights": "{home}/../elsewhere.pt"}), "outside DLGUIDE_HOME"),
    (payload(config={**payload()["config"], "weights": 3}), "of the wrong type"),
])
def test_a_bad_payload_is_refused_in_one_line(isolated_home, bad, why: str) -> None:
    weights = bad["config"].get("weights") if isinstance(bad, dict) and isinstance(bad.get("config"), dict) else None
    if isinstance(weights, str):
        bad["config"]["weights"] = weights.replace("{home}", str(isolated_home))
    with pytest.raises(DistributedError, match=why) as caught:
        check_payload(bad, None)
    assert str(caught.value).startswith("refusing the writer rank's instructions: ")
    assert "\n" not in str(caught.value)


def test_a_rank_on_the_jobs_machine_runs_only_its_own_job() -> None:
    with pytest.raises(DistributedError, match=f"this rank runs job {GOOD_ID}, not 20261124-120000-ffffffff"):
        check_payload(payload(job_id="20261124-120000-ffffffff"), GOOD_ID)


def test_a_symlinked_job_folder_outside_home_is_refused(isolated_home, tmp_path: Path) -> None:
    (isolated_home / "jobs").mkdir(parents=True)
    (isolated_home / "jobs" / GOOD_ID).symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(DistributedError, match="outside DLGUIDE_HOME"):
        check_payload(payload(), None)


EVIL = {"action": "run", "job_id": "../../escaped", "recipe": "cifar_net", "config": {}, "resume": True}


def _rogue_or_joiner(rank: int, port: int, folder: str) -> None:
    """Rank 0: a rogue process that reached the rendezvous and claims the job; rank 1: `worker --join`."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", DLGUIDE_HOME=str(Path(folder) / f"home-{rank}"))
    if rank == 0:
        env = D.DistEnv.from_env()
        D.join_group(env, timeout_s=60)
        D.find_writer(env, owns_job=True)
        D.broadcast_json(EVIL, 0)
        D.destroy_process_group()
        return
    with open(Path(folder) / "joiner.err", "w") as err, contextlib.redirect_stderr(err):
        code = worker.run_worker(None, str(Path(folder) / "data"))
    (Path(folder) / "joiner.json").write_text(json.dumps({"code": code}))


def test_a_joining_worker_refuses_a_rogue_writer(tmp_path: Path) -> None:
    # fork: both processes start with this one's imports (spawn would import torch twice more); CPU and Gloo only
    mp.start_processes(_rogue_or_joiner, args=(free_port(), str(tmp_path)), nprocs=2, join=True, start_method="fork")
    assert json.loads((tmp_path / "joiner.json").read_text()) == {"code": 1}
    assert (tmp_path / "joiner.err").read_text().strip() == (
        "rank 1: refusing the writer rank's instructions: job id '../../escaped' is not one dlguide makes")
    assert not list(tmp_path.rglob("escaped"))
