"""dlguide_core.threads: each kind of process blocks instead of spinning, decided before torch loads OpenMP, and the
user's own OMP_WAIT_POLICY / OMP_NUM_THREADS still win (issue 31, item 4)."""

import argparse
import os
from types import SimpleNamespace

import pytest

from dlguide_core import threads
from dlguide_core.cli import main as cli_main
from dlguide_core.jobs import queue

THREAD_VARS = (threads.WAIT_ENV, threads.THREADS_ENV, threads.DECIDED_ENV, threads.OFF_ENV)


@pytest.fixture
def clean_env(monkeypatch):
    for name in THREAD_VARS:  # set, then removed: undone afterwards even where declare() set it meanwhile
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(threads, "_declared", None)
    yield monkeypatch


@pytest.mark.parametrize("kind", ["server", "job", "cli", "bench"])
def test_every_kind_of_process_blocks_instead_of_spinning(kind):
    env = threads.environment(kind, {})
    assert env[threads.WAIT_ENV] == "PASSIVE"
    assert threads.THREADS_ENV not in env  # torch's default (physical cores); torchrun still gives its workers 1
    assert threads.POLICIES[kind].ort_spinning is False


def test_the_users_own_variables_win_and_off_decides_nothing():
    env = threads.environment("server", {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "1"})
    assert env == {}
    assert threads.environment("job", {threads.OFF_ENV: "off"}) == {}


def test_a_child_of_another_kind_replaces_what_dlguide_decided_but_not_what_the_user_set():
    parent = threads.environment("server", {"OMP_NUM_THREADS": "3"})  # the user's 3 stays the user's
    assert threads.THREADS_ENV not in parent and parent[threads.DECIDED_ENV] == threads.WAIT_ENV
    child = threads.environment("job", {"OMP_NUM_THREADS": "3", **parent})
    assert child[threads.WAIT_ENV] == "PASSIVE" and threads.THREADS_ENV not in child
    assert threads.environment("job", {"OMP_WAIT_POLICY": "ACTIVE"}) == {}  # the user's ACTIVE reaches the job


def test_a_job_launched_by_the_server_gets_the_job_policy(clean_env, tmp_path):
    clean_env.setenv("DLGUIDE_HOME", str(tmp_path))
    job = SimpleNamespace(slot=0, config={})  # job_env reads only these
    env = queue.job_env(job, {"PATH": os.environ.get("PATH", "")})
    assert env[threads.WAIT_ENV] == "PASSIVE" and threads.THREADS_ENV not in env


def test_the_cli_declares_its_kind_before_the_command_runs(clean_env):
    seen = {}

    def command(args: argparse.Namespace) -> int:  # where a command would import torch
        seen["wait"], seen["kind"] = os.environ.get(threads.WAIT_ENV), threads.current().kind
        return 0

    parser = cli_main.build_parser()
    clean_env.setattr(cli_main, "build_parser", lambda: parser)
    for action in parser._subparsers._group_actions[0].choices.values():
        action.set_defaults(func=command)
    assert cli_main.main(["bench", "--weights", "none"]) == 0
    assert seen == {"wait": "PASSIVE", "kind": "bench"}


@pytest.mark.parametrize(("argv", "kind"), [
    (["train", "--recipe", "cifar_net", "--data", "x"], "job"),
    (["train", "--recipe", "cifar_net", "--data", "x", "--detach"], "cli"),
    (["jobs", "resume", "abc"], "job"),
    (["jobs", "list"], "cli"),
    (["bench"], "bench"),
    (["classify", "x.jpg"], "cli"),
])
def test_process_kind_of_each_command(argv, kind):
    assert cli_main.process_kind(cli_main.build_parser().parse_args(argv)) == kind


def test_onnxruntime_sessions_follow_the_process_policy(clean_env):
    from dlguide_core.inference import backend_onnxruntime
    from dlguide_core.inference.backend_base import BackendOptions

    so = backend_onnxruntime.session_options(BackendOptions())
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert so.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    clean_env.setenv(threads.OFF_ENV, "off")
    so = backend_onnxruntime.session_options(BackendOptions())
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_apply_in_thread_sets_torchs_intra_op_threads(clean_env):
    import torch

    before = torch.get_num_threads()
    clean_env.setenv(threads.THREADS_ENV, "1")
    try:
        threads.apply_in_thread()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
