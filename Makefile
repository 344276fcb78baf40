# make run   -> create .venv, install, serve the app on 127.0.0.1:$(PORT) (DLGUIDE_ADDRESS and
#               DLGUIDE_ALLOWED_HOSTS serve a network: README, Serving to a team)
# make test  -> create .venv, install, ruff + mypy (make lint) + the whole pytest suite (browser tests included)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501
STAMP := $(VENV)/.installed
# AMD MIGraphX built for this machine's CPU (dev and CI only, never required): importable in the venv when present.
MIGRAPHX_SHARED ?= ../shared/migraphx

.PHONY: install run kiosk dev test lint browser-deps postgres-deps slurm-deps docker-deps bench bench-quick clean

install: $(STAMP)

# The bytecode is compiled after pip, on every core (pip compiles one file at a time: 213 s for the whole install
# on the 2-core CI box, 162 s this way). Never left to the first import: this box's environment sets
# PYTHONDONTWRITEBYTECODE=1 (a CI image may too), and then every process compiles torch again (about 15 s of CPU;
# a 2-worker run without this step took pytest 1475 s). `|| true`: as under pip, the few files written for a newer
# Python (torch's py312 test helpers) do not compile, and compileall says so in its exit status.

# The project itself last, editable and without dependencies (they are the lines above, constraints kept):
# `.venv/bin/dlguide` then runs from any folder, and a job's processes find the package wherever the user stood.
$(STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --no-compile -r requirements.txt -r requirements-dev.txt -c constraints.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-compile --no-deps -e .
	$(PY) -m compileall -qq -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	if [ -d $(MIGRAPHX_SHARED)/lib ]; then $(PY) -m dlguide_core.migraphx_lib $(MIGRAPHX_SHARED)/lib $(VENV); fi
	touch $(STAMP)

# serve.py: `streamlit run app.py` with app.py the only router from the first second, the app (or booth) warm
# before the port opens, listening on DLGUIDE_ADDRESS (default 127.0.0.1) and answering only the Host names of
# DLGUIDE_ALLOWED_HOSTS; the served config is .streamlit/config.toml (no file watcher). Tests and bench/ start
# servers the same way.
run: install
	$(PY) serve.py --server.port $(PORT)

# MALLOC_ARENA_MAX=2: a booth serves many visitors all day; glibc's per-thread arenas otherwise
# keep growing RSS (bench/bench_kiosk_load.py: +6.6% over 500 classifications vs +0.3% with it).
kiosk: install
	MALLOC_ARENA_MAX=2 DLGUIDE_KIOSK=1 $(PY) serve.py --server.port $(PORT)

# Live reload while editing (opt-in). "poll" checks only the app's own source files; "auto" (watchdog)
# puts inotify watches on the whole project folder, .venv's ~100k files included ("Inotify queue overflowed").
dev: install
	$(PY) serve.py --server.port $(PORT) --server.fileWatcherType poll --server.runOnSave true

# mypy: the settings in pyproject.toml ([tool.mypy]); its cache (.mypy_cache) makes a rerun take about a second.
# hadolint: the whole Dockerfile, both targets (the rules it ignores, and why: .hadolint.yaml).
lint: install
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/hadolint Dockerfile

# Debian chromium for the Playwright browser tests (Playwright's own browser download
# needs the internet; Debian's package does not).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing and not root: browser tests will skip (install Debian's chromium)"; fi; }

# Debian's slurm-wlm and munge for the tests' real single-node Slurm (tests/support/slurm.py; issue 20).
# Installed only as root; otherwise those tests skip with the reason.
slurm-deps:
	@{ command -v sbatch >/dev/null 2>&1 && test -x /usr/sbin/munged; } || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; \
	  else echo "slurm-wlm/munge missing and not root: the Slurm tests will skip (install Debian's slurm-wlm and munge)"; fi; }

# The job store's PostgreSQL tests start a throwaway server from Debian's binaries (tests/support/postgres.py);
# no default cluster is created (nothing listens until a test starts its own server).
postgres-deps:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then mkdir -p /etc/postgresql-common/createcluster.d && \
	    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/dlguide-no-main.conf && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "postgresql missing and not root: PostgreSQL store tests will skip (install Debian's postgresql)"; fi; }

# Debian's Docker engine, debootstrap (the stand-in base image) and docker-compose for the image tests
# (tests/support/docker.py starts a daemon of its own; issue 42). Installed only as root; otherwise those tests skip.
docker-deps:
	@{ command -v dockerd >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 && command -v docker-compose >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap docker-compose >/dev/null; \
	  else echo "docker.io/debootstrap/docker-compose missing and not root: the image tests will skip (install Debian's docker.io, debootstrap and docker-compose)"; fi; }

# The suite runs on TEST_WORKERS pytest-xdist workers (default 3 on the 2-core CI box: a worker often waits on a
# server, job or browser it started): whole test files per worker, the shared Slurm and Ray clusters' files on one
# worker each, the long groups first (tests/conftest.py, pytest_xdist_make_scheduler; docs/BENCHMARKS.md, "The test
# suite"). TEST_WORKERS=0 runs it serially (about 27 min).
# TEST_ENV: with more test processes than cores, each (and every server, job and export it starts) runs torch and
# OpenMP on one thread that sleeps when idle, rather than spinning against the others (dlguide_core/threads.py
# keeps a user's own OMP_* variables, as it does here).
TEST_WORKERS ?= 3
TEST_ENV ?= OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

# ruff first (a second); mypy beside the suite (about 30 s of a clean clone's CI, its report printed after pytest's);
# the target fails when either does.
# compileall: the project's own bytecode, written once here, since with PYTHONDONTWRITEBYTECODE=1 (this box's
# environment, and perhaps a CI image's) every server, job, rank and CLI call of the suite would compile the modules it
# imports again (a second for all of them).
test: install browser-deps postgres-deps slurm-deps docker-deps
	$(PY) -m ruff check .
	$(VENV)/bin/hadolint Dockerfile
	$(PY) -m compileall -qq -j 0 dlguide_core ui web pages tests bench app.py serve.py
	@{ $(PY) -m mypy > $(VENV)/mypy.out 2>&1; echo $$? > $(VENV)/mypy.rc; } & \
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS); status=$$?; wait; \
	echo "$(PY) -m mypy"; cat $(VENV)/mypy.out; \
	test $$status -eq 0 && test "$$(cat $(VENV)/mypy.rc)" = 0

bench: install
	$(PY) -m bench.bench_classify

# Every bench script's --quick run alone (make test runs them with the rest: tests/test_benches.py)
bench-quick: install browser-deps postgres-deps slurm-deps
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) tests/test_benches.py

clean:
	rm -rf $(VENV) .pytest_cache
