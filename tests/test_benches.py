"""Every bench script runs `--quick` (asv's habit): the smallest run that still goes through each of its steps, so a
bench that the code moved under breaks here, not on the day its figure is wanted. New scripts are picked up by the
glob. A script whose needs are missing here (a GPU, Slurm, PostgreSQL, chromium) says `SKIP: why` and exits 0.

No figure is checked: speed lives in the benches' own runs.

In `make test`: every script, each --quick about 20 s or less on the 2-core box (one server per kind, one visitor,
one round, waits of a second or two; the Slurm ones land their preemption or first step on a cluster of their own).
`make bench-quick` runs just these; docs/BENCHMARKS.md, "The bench harness", has the times."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

ALL_SCRIPTS = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem not in ("__init__", "common"))
QUICK_LIMIT_S = 300  # one script's --quick, generous for a loaded box (they take seconds to a minute)
MAX_LINES = 900  # docs/BENCHMARKS.md: one current figure per row; history lives in docs/benchmarks-history.md


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """The script's TMPDIR: short, for the Unix sockets made in it (chromium's SingletonSocket under pytest's own
    tmp_path is past the 107-byte limit: chromium aborts), and readable by the postgres user (initdb runs as it)."""
    folder = Path(tempfile.mkdtemp(prefix="bq-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name", ALL_SCRIPTS)
def test_bench_runs_quick(name: str, tmp_path: Path, short_tmp: Path, fake_imagenet: Path) -> None:
    # fake_imagenet: the run's one stand-in ImageNet file in TORCH_HOME, so no script builds its own
    env = {**os.environ, "TMPDIR": str(short_tmp), "PYTHONDONTWRITEBYTECODE": "1"}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"bench.{name}", "--quick", "--json", str(tmp_path / "out.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=QUICK_LIMIT_S)
    took = time.monotonic() - began
    said = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"bench.{name} --quick exited {done.returncode} after {took:.0f} s:\n{said}"
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIP: ")]
    if skipped:
        print(skipped[0])  # the reason, for `pytest -rA -s`
        return
    assert (tmp_path / "out.json").is_file(), f"bench.{name} wrote no result record (--json):\n{said}"
    print(f"bench.{name} --quick: {took:.1f} s")


def test_every_bench_script_takes_quick() -> None:
    """Read from the code, not run: a script that forgot --quick would run its full length in `make test`."""
    missing = [name for name in ALL_SCRIPTS if "bench.common" not in (ROOT / "bench" / f"{name}.py").read_text()]
    assert not missing, f"bench scripts not built on bench.common's parser (--quick, --json): {missing}"


def test_benchmarks_doc_stays_a_reference() -> None:
    lines = (ROOT / "docs" / "BENCHMARKS.md").read_text().count("\n")
    assert lines <= MAX_LINES, f"docs/BENCHMARKS.md is {lines} lines: history goes to docs/benchmarks-history.md"
