"""How `make test`'s parallel workers group the suite (tests/conftest.py's pytest_xdist_make_scheduler)."""

from __future__ import annotations

import functools

from tests.support.paths import ROOT

# A test file that uses one of these session fixtures (a whole cluster) runs on the same worker as every other
# such file, so each cluster starts once per run, not once per worker (read from the file's text: a miss costs
# only a second start, never a wrong result).
SHARED_CLUSTERS = {"slurm_cluster": "slurm", "ray_head": "ray"}
# Groups that take minutes go to the workers first, in this order, so none is left running alone at the end
# (per-file times: `pytest --durations=0`, docs/BENCHMARKS.md "The test suite"); the rest keep collection order.
# The image tests first of all: a fresh machine builds the stand-in base and the image there (about 10 minutes).
LONG_FIRST = ("tests/docker/test_image.py", "slurm", "tests/training/test_distributed.py", "tests/served/test_kiosk.py",
              "ray",
              "tests/inference/test_backend_migraphx.py", "tests/tf/test_tensorflow_recipes.py",
              "tests/served/test_train_page.py", "tests/inference/test_backend_zentorch.py",
              "tests/jobs/test_store_and_queue.py", "tests/served/test_concurrent_sessions.py",
              "tests/served/test_first_visit.py", "tests/served/test_booth_load.py", "tests/cli/test_export.py",
              "tests/pages/test_kiosk.py")


# Files whose tests share nothing (no module or cluster fixture): each test is a unit of its own, spread over the
# workers. The bench scripts' --quick runs: each starts its own servers, browsers or cluster (issue 45: all of them
# in about 3 minutes, where one worker took them one after another in 227 s).
SPREAD_FILES = frozenset({"tests/test_benches.py"})


def work_unit(nodeid: str) -> str:
    """The unit a test is scheduled in: its own node id in SPREAD_FILES, else its file's worker group."""
    path = nodeid.split("::")[0]
    return nodeid if path in SPREAD_FILES else worker_group(path)


@functools.cache
def worker_group(path: str) -> str:
    """The worker group of a test file (its path relative to the checkout): a shared cluster's name, else itself."""
    text = (ROOT / path).read_text(errors="replace")
    return next((group for fixture, group in SHARED_CLUSTERS.items() if fixture in text), path)
