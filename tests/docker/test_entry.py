"""The image's entry (dlguide_core.container) outside a container, no engine needed: a plain wrapper that passes a
stop signal to its command and exits with the command's status (inside one: tests/docker/test_image.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

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
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 7
        assert time.monotonic() - began < 10
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_it_is_not_the_whole_container_here_and_says_its_usage() -> None:
    assert not container.own_pid_namespace()
    assert container.main([]) == 2
