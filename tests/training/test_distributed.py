"""distributed: DDP averages gradients right, only one rank reports, launch commands are exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dlguide_core.data.image_folders import load_data
from dlguide_core.errors import DistributedError
from dlguide_core.jobs import launch as L
from dlguide_core.jobs import worker
from dlguide_core.jobs.store import JobStore
from dlguide_core.training import distributed as D
from dlguide_core.training.distributed_sinks import WriterRankSink
from dlguide_core.vision.checkpoints import load_checkpoint
from dlguide_core.vision.models import load_model
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.sinks import RecordingSink
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

# ------------------------------------------------------------------ pure helpers


def test_env_is_read_from_torchrun_variables() -> None:
    env = D.DistEnv.from_env({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                              "TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "3",
                              "TORCHELASTIC_RUN_ID": "x"})
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size) == (3, 1, 4, 2)
    assert env.enabled and env.under_torchrun and env.restarts_left == 2 and not env.is_writer
    alone = D.DistEnv.from_env({})
    assert not alone.enabled and not alone.under_torchrun and alone.is_writer


def test_backend_and_device_per_local_rank() -> None:
    if not torch.cuda.is_available():
        assert D.process_group_backend() == "gloo"
    env = D.DistEnv(rank=1, local_rank=1, world_size=2, local_world_size=2)
    assert D.device_for("cpu", env) == torch.device("cpu")
    if not torch.cuda.is_available():
        assert D.device_for("auto", env) == torch.device("cpu")
        with pytest.raises(DistributedError, match="no GPU"):
            D.device_for("cuda", env)


def test_sharded_sampler_splits_each_epoch_and_skips_on_resume() -> None:
    data = TensorDataset(torch.arange(10))
    shards = [D.ShardedEpochSampler(data, 3, r, seed=5) for r in range(3)]
    for s in shards:
        s.set_position(2, 0)
    seen = [list(s) for s in shards]
    assert all(len(x) == len(s) == 4 for x, s in zip(seen, shards))  # padded to equal shards
    assert set(sum(seen, [])) == set(range(10))
    one = D.ShardedEpochSampler(data, 1, 0, seed=5)
    one.set_position(2, 0)
    assert [seen[i % 3][i // 3] for i in range(10)] == list(one)  # rank r takes every 3rd of one permutation
    shards[1].set_position(2, 3)
    assert list(shards[1]) == seen[1][3:] and len(shards[1]) == 1
    shards[1].set_position(3, 0)
    assert list(shards[1]) != seen[1]  # set_epoch reshuffles
    val = [list(D.ShardSampler(10, 3, r)) for r in range(3)]
    assert sorted(sum(val, [])) == list(range(10))  # no padding: the whole val set exactly once


def test_one_seeded_epoch_shuffle_serves_both_samplers() -> None:
    from dlguide_core.training.factories import EpochSampler

    order = D.epoch_permutation(10, seed=5, epoch=2)
    assert sorted(order) == list(range(10)) and order != D.epoch_permutation(10, seed=5, epoch=3)
    single = EpochSampler(10, seed=5)
    single.set_position(2, 4)
    assert list(single) == order[4:]  # a resume skips exactly what was trained on
    sharded = D.ShardedEpochSampler(TensorDataset(torch.arange(10)), 2, 1, seed=5)
    sharded.set_position(2, 0)
    assert list(sharded) == order[1::2]


def test_steps_lr_and_batch_arithmetic() -> None:
    assert D.steps_per_epoch(100, 8, 1) == 13 and D.steps_per_epoch(100, 8, 2) == 7
    assert D.scaled_lr(0.1, 8, False) == 0.1 and D.scaled_lr(0.1, 8, True) == pytest.approx(0.8)
    assert L.global_batch(32, 8) == 256 and L.global_batch(32, 8, 2) == 512
    assert L.describe_batch(32, 8, 2) == "global batch 512 (32 per device x 8 processes x 2 machines)"
    assert L.describe_batch(4) == "global batch 4 (4 per device x 1 process x 1 machine)"


def test_sync_batchnorm_is_refused_up_front_for_a_cpu_job(monkeypatch) -> None:
    with pytest.raises(DistributedError, match="sync batchnorm needs GPUs"):
        D.check_devices("cpu", True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DistributedError, match="sync batchnorm needs GPUs"):
        D.check_devices("auto", True)
    D.check_devices("auto", False)
    D.check_devices("cuda", True)  # a GPU job: resolve_device says so if there is none
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    D.check_devices("auto", True)


def test_launch_commands_single_and_multi_node() -> None:
    local = L.LaunchSpec(nproc_per_node=2, max_restarts=1)
    cmd = L.torchrun_command(local, "job-1")
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"] and cmd[-3:] == ["-m", "dlguide_core.jobs.worker",
                                                                                       "job-1"]
    assert "--standalone" in cmd and cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert cmd[cmd.index("--max-restarts") + 1] == "1"
    multi = L.LaunchSpec(nproc_per_node=8, nnodes=2, rdzv_endpoint="node0:29400")
    cmd = L.torchrun_command(multi, "job-1")
    assert "--standalone" not in cmd and cmd[cmd.index("--rdzv-endpoint") + 1] == "node0:29400"
    assert cmd[cmd.index("--rdzv-backend") + 1] == "c10d" and cmd[cmd.index("--nnodes") + 1] == "2"
    assert L.torchrun_command(L.LaunchSpec(2, 2, 1, "node0:29400"), data="/d")[-2:] == ["--join", "/d"]
    assert L.join_commands(multi, "inception_v3", "/data/tiny") == [
        "python -m dlguide_core train --recipe inception_v3 --data /data/tiny --nproc-per-node 8 --nnodes 2 "
        "--node-rank 1 --rdzv-endpoint node0:29400"]
    assert not L.LaunchSpec().uses_torchrun and L.LaunchSpec(max_restarts=2).uses_torchrun


@pytest.mark.parametrize("fields, message", [
    ({"nnodes": 2}, "rdzv-endpoint"), ({"nnodes": 2, "rdzv_endpoint": "node0"}, "HOST:PORT"),
    ({"nproc_per_node": 0}, "at least 1"), ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}, "node-rank"),
    ({"max_restarts": -1}, "negative")])
def test_launch_spec_refuses_what_cannot_work(fields: dict, message: str) -> None:
    with pytest.raises(DistributedError, match=message):
        L.LaunchSpec(**fields)


def test_writer_rank_sink_alone_passes_everything_through() -> None:
    inner = RecordingSink(stop_after=2)
    sink = WriterRankSink(inner, D.DistEnv())
    sink.on_start(total_steps=3, epochs=1, class_names=("a",))
    sink.on_step(1, 0, 2.0, 0.1, 10.0)
    assert not sink.should_stop()
    sink.on_step(2, 0, 1.0, 0.1, 10.0)
    assert sink.should_stop() and [s["loss"] for s in inner.steps] == [2.0, 1.0]
    assert inner.steps[0]["world_size"] == 1 and inner.plan["total_steps"] == 3


def test_a_writer_rank_that_is_not_this_one_stays_silent() -> None:
    inner = RecordingSink()
    sink = WriterRankSink(inner, D.DistEnv(writer_rank=1))
    sink.on_start(total_steps=3, epochs=1)
    sink.on_epoch(0, {"top1": 1.0})
    sink.on_checkpoint(Path("x"), step=1)
    assert inner.plan == {} and inner.epochs == [] and inner.checkpoints == []


# ------------------------------------------------------------------ real process groups (Gloo on the CPU)


def _toy_worker(rank: int, world: int, batch: int, port: int, out: str) -> None:
    """A deterministic toy run through the real DDP pieces; the writer saves what it recorded."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    env, device = D.DistEnv.from_env(), torch.device("cpu")
    if env.enabled:
        D.join_group(env, timeout_s=60)
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(48, 8, generator=generator), torch.randint(0, 3, (48,), generator=generator))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    if env.enabled:
        model = D.wrap_ddp(model, device)
    sampler = D.ShardedEpochSampler(data, world, rank, seed=0)
    sampler.set_position(0, 0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    sink = WriterRankSink(RecordingSink(), env)
    for step, (x, y) in enumerate(DataLoader(data, batch_size=batch, sampler=sampler), start=1):
        loss = nn.functional.cross_entropy(model(x), y)  # mean over this rank's batch
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over ranks here
        optimizer.step()
        sink.on_step(step, 0, loss.item(), 0.5, 100.0)
    with torch.no_grad():  # val over disjoint shards, all-reduced: must equal the whole set
        shard = D.ShardSampler(len(data), world, rank).indices
        hits = (model(data.tensors[0][shard]).argmax(1) == data.tensors[1][shard]).sum()
        totals = D.all_reduce_sum(torch.tensor([float(hits), float(len(shard))]))
    if env.is_writer:
        steps = sink.inner.steps
        Path(out).write_text(json.dumps({"losses": [s["loss"] for s in steps],
                                         "ips": [s["images_per_s"] for s in steps], "val": totals.tolist()}))
    D.destroy_process_group()


def _toy_run(tmp_path: Path, world: int, batch: int) -> dict:
    out = tmp_path / f"toy-{world}.json"
    # world 1 runs in a child too: the worker sets RANK/WORLD_SIZE and one torch thread, which must not
    # leak into the tests that run after it in this process
    mp.spawn(_toy_worker, args=(world, batch, free_port(), str(out)), nprocs=world, join=True)
    return json.loads(out.read_text())


def _share_worker(rank: int, port: int, folders: list[str]) -> None:
    """Rank 0 is the writer on "machine A"; rank 1 reads its own copy on "machine B" (one group, every case)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    env = D.DistEnv.from_env()
    D.join_group(env, timeout_s=60)
    for folder in folders:
        worker.share_checkpoint(env, Path(folder) / f"machine-{rank}" / "checkpoint.pt")
    D.destroy_process_group()


def test_share_checkpoint_replaces_a_missing_or_stale_copy_on_another_machine(tmp_path: Path) -> None:
    # Three cases in one process group (each spawn of two torch processes costs seconds): no copy on the
    # other machine, a stale copy from an earlier resume, and a copy that is already current.
    cases = {"missing": None, "stale": b"an older checkpoint from an earlier resume", "current": b"current"}
    for name, other_copy in cases.items():
        writer, other = tmp_path / name / "machine-0" / "checkpoint.pt", tmp_path / name / "machine-1" / "checkpoint.pt"
        writer.parent.mkdir(parents=True)
        writer.write_bytes(b"current")
        if other_copy is not None:
            other.parent.mkdir()
            other.write_bytes(other_copy)
    mp.spawn(_share_worker, args=(free_port(), [str(tmp_path / name) for name in cases]), nprocs=2, join=True)
    for name in cases:
        for machine in ("machine-0", "machine-1"):
            assert (tmp_path / name / machine / "checkpoint.pt").read_bytes() == b"current", (name, machine)
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.slow
def test_two_processes_of_batch_b_match_one_process_of_batch_2b(tmp_path: Path) -> None:
    one = _toy_run(tmp_path, world=1, batch=8)
    two = _toy_run(tmp_path, world=2, batch=4)
    assert len(one["losses"]) == len(two["losses"]) == 6
    assert two["losses"] == pytest.approx(one["losses"], abs=1e-4)  # gradients averaged, not summed
    assert one["losses"][-1] < one["losses"][0]  # it trains, so a wrong average would show
    assert two["ips"] == [200.0] * 6  # images/s summed over ranks
    assert two["val"] == pytest.approx(one["val"]) and two["val"][1] == 48  # the whole val set, not one shard


# ------------------------------------------------------------------ through the CLI and torchrun (Gloo, CPU)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--device", "cpu",
                           "--workers", "0", *args], cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def _job_processes(store: JobStore, job_id: str) -> tuple[psutil.Process, list[psutil.Process]]:
    agent = psutil.Process(store.get(job_id).pid)
    assert "torch.distributed.run" in agent.cmdline()
    workers = wait_for(lambda: len(agent.children()) == 2 and agent.children(), 60, what="two workers")
    return agent, workers


def _rank(proc: psutil.Process) -> str | None:
    return proc.environ().get("RANK")


def _left_alive(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    end = time.monotonic() + timeout
    alive = procs
    while alive and time.monotonic() < end:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.2)
    return alive


@pytest.fixture
def toy_data(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy", classes=2, per_class=8, val_per_class=3)


@pytest.mark.slow
def test_two_gloo_processes_through_the_cli_make_one_job(toy_data: Path) -> None:
    out = _cli("--data", str(toy_data), "--epochs", "2", "--nproc-per-node", "2", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    store = JobStore()
    job = store.get(result["job_id"])
    assert job.status == result["status"] == "succeeded" and job.config["nproc_per_node"] == 2
    assert job.total_steps == 4 and store.steps(job.id)["step"] == [1, 2, 3, 4]  # 16 images / (2 x batch 4)
    assert [e["epoch"] for e in store.epochs(job.id)] == [0, 1]
    assert [p.name for p in job.job_dir.iterdir() if ".pt" in p.name] == ["checkpoint.pt"]  # one, by one rank
    saved = load_checkpoint(job.checkpoint)
    assert saved["step"] == 4 and saved["config"]["nproc_per_node"] == 2
    # The recorded val metrics are those of the whole val set (6 images), not of one rank's shard.
    model, val = load_model(job.checkpoint).model, load_data("cifar_net", str(toy_data), 32).val
    images = torch.stack([val[i][0] for i in range(len(val))])  # (6, 3, 32, 32)
    targets = torch.tensor([val[i][1] for i in range(len(val))])
    with torch.no_grad():
        logits = model(images)
    last = store.epochs(job.id)[-1]
    assert last["val_loss"] == pytest.approx(float(nn.functional.cross_entropy(logits, targets)), rel=1e-4)
    assert last["top1"] == pytest.approx(100.0 * float((logits.argmax(1) == targets).float().mean()))


@pytest.mark.slow
def test_killing_one_rank_interrupts_the_job_and_leaves_no_process(toy_data: Path) -> None:
    out = _cli("--data", str(toy_data), "--epochs", "5000", "--nproc-per-node", "2", "--detach", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    store, job_id = JobStore(), json.loads(out.stdout)["job_id"]
    agent, workers = _job_processes(store, job_id)
    wait_for(lambda: store.last_step(job_id), 180, what="the first step")
    next(p for p in workers if _rank(p) == "1").kill()
    job = wait_for(lambda: (j := store.get(job_id)).status != "running" and j, 60, what="the job to leave running")
    assert job.status == "interrupted" and "rank" in job.error
    assert _left_alive([agent, *workers], 30) == []


@pytest.mark.slow
def test_a_dead_rank_within_max_restarts_resumes_from_the_checkpoint(toy_data: Path) -> None:
    out = _cli("--data", str(toy_data), "--epochs", "100", "--nproc-per-node", "2", "--max-restarts", "1",
               "--detach", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    store, job_id = JobStore(), json.loads(out.stdout)["job_id"]
    agent, workers = _job_processes(store, job_id)
    wait_for(lambda: (j := store.get(job_id)).status == "running" and (j.checkpoint_step or 0) >= 4, 180,
             what="a checkpoint")  # 100 toy epochs: seconds of room to kill a rank while the job still runs
    next(p for p in workers if _rank(p) == "1").kill()
    # the restart passes through interrupted and queued (prepare_resume, then claim) on its way back to running
    job = wait_for(lambda: (j := store.get(job_id)).status in ("succeeded", "failed", "cancelled") and j, 300,
                   what="the end")
    assert job.status == "succeeded" and job.attempts == 2, job.error
    assert store.steps(job_id)["step"] == list(range(1, 201))  # one curve: redone steps replace, none missing
    assert "resuming from its checkpoint" in job.log_path.read_text()
    assert _left_alive([agent, *workers], 30) == []


# ------------------------------------------------------------------ the Train page


def test_train_page_offers_devices_and_shows_the_other_machines_command(tmp_path: Path, monkeypatch) -> None:
    from tests.support.apptest import open_app

    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    devices = at.number_input(key="train_cifar_net_nproc")
    assert devices.max == L.device_options()[0] >= 2 and devices.value == 1
    devices.set_value(2).run()
    at.toggle(key="train_cifar_net_multinode").set_value(True).run()
    assert any("HOST:PORT" in w.value for w in at.warning)  # no endpoint yet: says what is missing
    at.text_input(key="train_cifar_net_rdzv").input("node0.example:29400").run()
    assert not at.exception, at.exception
    assert [c.value for c in at.code] == [
        f"python -m dlguide_core train --recipe cifar_net --data {tmp_path / 'roots' / 'toy'} --nproc-per-node 2 "
        "--nnodes 2 --node-rank 1 --rdzv-endpoint node0.example:29400"]
    # The global batch as a number: cifar_net's batch 4 per device x 2 processes x 2 machines.
    assert any("global batch 16 (4 per device x 2 processes x 2 machines)" in c.value for c in at.caption)


def test_train_page_refuses_a_bad_rendezvous_endpoint_at_submit(tmp_path: Path, monkeypatch) -> None:
    from tests.support.apptest import open_app

    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.toggle(key="train_cifar_net_multinode").set_value(True).run()
    at.text_input(key="train_cifar_net_rdzv").input("node0:").run()
    at.button(key="train_cifar_net_start").click().run()
    assert not at.exception, at.exception
    assert any("HOST:PORT" in e.value for e in at.error) and JobStore().list_jobs() == []


def test_a_single_process_torchrun_job_runs_on_its_slots_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--max-restarts N` runs one process under torchrun: it must take the queue's slot, not GPU 0."""
    from dataclasses import replace

    from dlguide_core.jobs.queue import job_env
    from dlguide_core.training import recipes

    seen = []
    stand_in = replace(recipes.get_recipe("cifar_net"), name="slot_probe")
    monkeypatch.setattr(recipes.Recipe, "run_function", lambda self: lambda cfg, ctx: seen.append(ctx.slot))
    monkeypatch.setitem(recipes._REGISTRY, "slot_probe", stand_in)
    config = {"nproc_per_node": 1, "max_restarts": 2}
    job = replace(JobStore().create("slot_probe", "pytorch", config), slot=1)  # the queue's second GPU
    env = job_env(job, {})
    assert "CUDA_VISIBLE_DEVICES" not in env  # one device: not pinned, it sees every GPU
    monkeypatch.setenv("DLGUIDE_GPU_SLOT", env["DLGUIDE_GPU_SLOT"])  # what torchrun's worker inherits
    worker._train(D.DistEnv(under_torchrun=True), {"job_id": job.id, "recipe": "slot_probe", "config": config,
                                                    "resume": False}, None, RecordingSink())
    assert seen == [1]
    pinned = job_env(replace(job, config={"nproc_per_node": 2}, slot=2), {})
    assert pinned["CUDA_VISIBLE_DEVICES"] == "2,3" and pinned["DLGUIDE_GPU_SLOT"] == "0"  # its block: cuda:0, 1


@pytest.mark.parametrize("cancel_flag", [False, True])
def test_a_writer_stopped_by_a_signal_judges_its_ending_while_its_store_sink_is_open(monkeypatch: pytest.MonkeyPatch,
                                                                                   cancel_flag: bool) -> None:
    """A scheduler's TERM (Slurm's scancel) stops the writer rank; its ending asks the store's cancel flag through
    the sink, which is closed only after (closed first, the rank failed on a closed store, its job left running)."""
    from dlguide_core.jobs.store_sink import StoreSink
    from dlguide_core.training.configs import RunResult

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, os.getpid())
    if cancel_flag:
        store.request_cancel(job.id)  # dlguide's cancel: the flag, then the TERM
    local = StoreSink(store.url, job.id)

    def stopped_by_term(env, payload, data, sink):
        local.request_stop("SIGTERM")
        return RunResult("stopped", 3, 0)

    monkeypatch.setattr(worker, "_train", stopped_by_term)
    outcome = worker._train_to_outcome(D.DistEnv(), {"job_id": job.id}, None, local, local)  # type: ignore[arg-type]
    stopped = ("interrupted", "stopped by SIGTERM at step 3; resume continues it", 0)
    assert outcome == (("cancelled", None, 0) if cancel_flag else stopped)
    assert local._closing.is_set()  # closed once judged


def test_ranks_take_their_gpu_from_the_slot_and_local_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    two = D.DistEnv(rank=1, local_rank=1, world_size=2, local_world_size=2)
    assert str(D.device_for("cuda", two)) == "cuda:1"  # pinned to its block: the slot in the process is 0
    one_per_node = D.DistEnv(rank=1, local_rank=0, world_size=2, local_world_size=1)
    assert str(D.device_for("auto", one_per_node, slot=3)) == "cuda:3"  # one process per machine, unpinned
