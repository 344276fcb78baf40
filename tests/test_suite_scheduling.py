"""The parallel runs' scheduler (tests/conftest.py): its groups name real files and clusters."""

from __future__ import annotations

from tests.support.paths import ROOT
from tests.support.scheduling import LONG_FIRST, SHARED_CLUSTERS, SPREAD_FILES, work_unit, worker_group


def test_the_long_groups_are_files_of_the_suite_or_shared_clusters() -> None:
    """A renamed file in LONG_FIRST would silently lose its early start."""
    for group in LONG_FIRST:
        assert group in SHARED_CLUSTERS.values() or (ROOT / group).is_file(), group


def test_files_on_a_shared_cluster_share_one_group_and_others_are_their_own() -> None:
    assert worker_group("tests/jobs/executors/test_slurm.py") == "slurm"
    assert worker_group("tests/served/test_train_slurm.py") == "slurm"
    assert worker_group("tests/jobs/executors/test_ray.py") == "ray"
    assert worker_group("tests/ui/test_tables.py") == "tests/ui/test_tables.py"


def test_spread_files_schedule_each_test_alone_and_name_real_files() -> None:
    for path in SPREAD_FILES:
        assert (ROOT / path).is_file(), path
    a, b = (f"tests/test_benches.py::test_bench_runs_quick[{name}]" for name in ("bench_a", "bench_b"))
    assert work_unit(a) == a and work_unit(b) == b  # one unit each: spread over the workers
    assert work_unit("tests/ui/test_tables.py::test_x") == work_unit("tests/ui/test_tables.py::test_y")
    assert work_unit("tests/jobs/executors/test_slurm.py::test_x") == "slurm"
