"""The image's entry (dlguide_core.container) outside a container, no engine needed: a plain wrapper that passes a
stop signal to its command and exits with the command's status (inside one: tests/docker/test_image.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from dlguide_core import container

CHILD = """import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
print('ready', flush=True)
time.sleep(120)
"""


def test_outside_a_container_it_passes_sigterm_to_its_command_and_returns_its_status() -> None:
    env = {**os.environ, "DLGUIDE_CONTAINER": "1"}  # set, yet no container init is PID 1 here: the plain wrapper
    proc = subprocess.Popen([sys.executable, "-m", "dlguide_core.container", sys.executable, "-c", CHILD],
                            stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 7
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_it_is_not_the_whole_container_here_and_says_its_usage() -> None:
    assert not container.own_pid_namespace()
    assert container.main([]) == 2


STUBBORN = """import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print('ready', flush=True)
time.sleep(120)
"""
ENTRY_WITH_SHORT_GRACE = """import sys
from dlguide_core import container
container.STOP_GRACE_S = 1.0
sys.exit(container.main(sys.argv[1:]))
"""


def test_a_command_that_ignores_the_stop_is_killed_at_the_end_of_the_grace_and_says_so() -> None:
    """Docker's own SIGKILL comes 10 s after its SIGTERM; the entry ends first, with a line in `docker logs`."""
    proc = subprocess.Popen([sys.executable, "-c", ENTRY_WITH_SHORT_GRACE, sys.executable, "-c", STUBBORN],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + signal.SIGKILL
        assert "did not end within 1 s of the signal: killed" in err
        assert "dlguide: stopped 1." in err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
