"""The Dockerfile and its README lines as served to a team (issue 22; no Docker engine here, so they are read):
a non-root user, 0.0.0.0 with the host list required, no --ipc=host."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.paths import ROOT
from tests.support.ports import free_port

DOCKERFILE = (ROOT / "Dockerfile").read_text()
README = (ROOT / "README.md").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(row for row in DOCKERFILE.splitlines() if not row.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def test_the_image_runs_as_a_non_root_user_that_owns_the_data() -> None:
    steps = instructions()
    users = [args.strip() for kind, args in steps if kind == "USER"]
    assert users and users[-1] not in ("root", "0"), "the last USER must not be root"
    last_user = max(i for i, (kind, _) in enumerate(steps) if kind == "USER")
    last_cmd = max(i for i, (kind, _) in enumerate(steps) if kind == "CMD")  # the last stage's (issue 42: two)
    assert last_user < last_cmd
    assert f"chown -R {users[-1]}:{users[-1]} /data" in DOCKERFILE


def test_cmd_serves_every_interface_through_serve_py_and_the_host_list_is_not_baked_in() -> None:
    cmd = [args for kind, args in instructions() if kind == "CMD"][-1]
    assert '"serve.py"' in cmd and '"--server.address=0.0.0.0"' in cmd
    envs = " ".join(args for kind, args in instructions() if kind == "ENV")
    assert "DLGUIDE_ALLOWED_HOSTS" not in envs, "the operator must name the hosts"
    healthcheck = [args for kind, args in instructions() if kind == "HEALTHCHECK"][-1]
    assert "DLGUIDE_ALLOWED_HOSTS" in healthcheck and "'Host': h" in healthcheck


def test_the_cmd_refuses_to_start_without_the_host_list() -> None:
    """The image's command line, here: without DLGUIDE_ALLOWED_HOSTS it stops with one line (exit 2)."""
    result = subprocess.run([sys.executable, "serve.py", f"--server.port={free_port()}",
                             "--server.address=0.0.0.0"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "DLGUIDE_ALLOWED_HOSTS": ""})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "dlguide: not starting: serving to a network (address '0.0.0.0') needs DLGUIDE_ALLOWED_HOSTS: the "
        "comma-separated host names visitors use"]


def test_the_documented_run_uses_shm_size_and_names_the_hosts() -> None:
    runs = re.findall(r"docker run [^`]*?dlguide\n", README.replace("\\\n", " ")) + \
        re.findall(r"#\s+docker run .*?dlguide\n", DOCKERFILE.replace("\\\n#", " "), re.S)
    assert len(runs) >= 2
    for run in runs:
        assert "--ipc=host" not in run and "--shm-size" in run, run
        assert "DLGUIDE_ALLOWED_HOSTS=" in run, run
