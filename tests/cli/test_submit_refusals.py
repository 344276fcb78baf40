"""Issue 33 (partly fixed before): what the job would fail on is refused at submit, in one line, exit 2, with no
job queued: a --weights file that is not a checkpoint, `evaluate --detach` with missing weights, a rendezvous
endpoint that is not HOST:PORT (`x;id:1`); a joining node whose endpoint does not resolve is one line too."""

from __future__ import annotations

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import write_toy_dataset


@pytest.fixture
def toy(tmp_path):
    return write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)


@pytest.mark.parametrize("argv, message", [
    (["train", "--weights", "/etc/passwd", "--detach"], "passwd: not a loadable checkpoint"),
    (["train", "--weights", "/nonexistent.pt", "--detach"], "checkpoint not found"),
    (["train", "--nnodes", "2", "--rdzv-endpoint", "x;id:1", "--detach"], "not 'x;id:1'"),
    (["train", "--nnodes", "2", "--rdzv-endpoint", "$(id):29500", "--detach"], "HOST:PORT"),
    (["evaluate", "--weights", "/nonexistent.pt", "--detach"], "checkpoint not found"),
    (["evaluate", "--weights", "/etc/passwd", "--detach"], "not a loadable checkpoint"),
    (["train", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "no-such-host.invalid:29500"],
     "cannot be resolved here"),
])
def test_refused_at_submit_in_one_line(argv, message, toy, capsys) -> None:
    extra = ["--recipe", "cifar_net", "--device", "cpu"] if argv[0] == "train" else []
    assert main([*argv, *extra, "--data", str(toy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert JobStore().list_jobs(refresh=False) == []
