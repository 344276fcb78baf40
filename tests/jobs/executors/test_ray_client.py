"""Ray's job API with a deadline: addresses, the status map, a head that never answers (no Ray cluster needed)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from dlguide_core.jobs.executors import ray_client
from dlguide_core.jobs.executors.ray_client import RayError


def test_address_comes_from_the_flag_then_ray_address(monkeypatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "http://10.0.0.5:8265/")
    assert ray_client.resolve_address(None) == "http://10.0.0.5:8265"
    assert ray_client.resolve_address("http://127.0.0.1:9000") == "http://127.0.0.1:9000"
    monkeypatch.delenv("RAY_ADDRESS")
    with pytest.raises(RayError, match="--ray-address"):
        ray_client.resolve_address(None)
    with pytest.raises(RayError, match="job API's URL"):
        ray_client.resolve_address("ray://head:10001")


@pytest.mark.parametrize(("address", "loopback"), [("http://127.0.0.1:8265", True), ("http://localhost:1", True),
                                                   ("http://[::1]:8265", True), ("http://10.1.2.3:8265", False),
                                                   ("https://ray.lab.example:443", False)])
def test_loopback_addresses(address, loopback) -> None:
    assert ray_client.is_loopback(address) is loopback


@pytest.mark.parametrize(("ray_status", "error_type", "status"), [
    ("PENDING", None, "queued"), ("RUNNING", None, "running"), ("SUCCEEDED", None, "succeeded"),
    ("STOPPED", None, "cancelled"), ("FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR", "failed"),
    ("FAILED", "JOB_SUPERVISOR_ACTOR_DIED", "interrupted"),  # the node was lost: resumable
])
def test_status_map(ray_status, error_type, status) -> None:
    assert ray_client.dlguide_status(ray_status, error_type) == status


@pytest.fixture
def silent_server():
    """A loopback port that accepts connections and never answers (a hung head)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    sock.close()


def test_a_head_that_never_answers_costs_one_timeout_not_a_hang(silent_server) -> None:
    pytest.importorskip("ray.job_submission")
    started = time.monotonic()
    assert "not answering" in ray_client.probe(silent_server, timeout=0.5)
    with pytest.raises(RayError, match="not answering"):
        ray_client.client(silent_server, timeout=0.5)  # Ray's own client has no timeout: ours gives it one
    assert time.monotonic() - started < 30  # a hang would run to the test's own timeout


def test_a_closed_port_is_not_answering() -> None:
    from tests.support.ports import free_port

    assert "not answering" in ray_client.probe(f"http://127.0.0.1:{free_port()}", timeout=1)
