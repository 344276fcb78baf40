"""Talking to a Ray cluster's job API with a deadline on every call, and reading its answers in dlguide's words.

Ray's `JobSubmissionClient` sends its HTTP requests without a timeout: a head that accepts the connection
and never answers would hang the Train page. `TimedJobClient` gives every request one (its `_do_request` is
where Ray funnels them all, the version check in its constructor included). Whether an address answers at
all (`probe`) needs no Ray: one GET of `/api/version`, so the page can ask it without importing Ray.
Loopback requests bypass any proxy (Ray's client and urllib honour `http_proxy` even for 127.0.0.1).
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dlguide_core.errors import DlguideError, UsageError, error_summary
from dlguide_core.jobs.store_url import UrlError, mask, mask_url, split_url

ADDRESS_ENV = "RAY_ADDRESS"  # Ray's own variable: the job API, e.g. http://127.0.0.1:8265
CALL_TIMEOUT_S = 5.0  # any one request to the head
PROBE_TIMEOUT_S = 2.0  # "does the address answer" on the Train page

# Ray's job statuses -> dlguide's; FAILED depends on why (see dlguide_status).
STATUS_MAP = {"PENDING": "queued", "RUNNING": "running", "SUCCEEDED": "succeeded", "STOPPED": "cancelled",
              "FAILED": "failed"}
FINAL = ("SUCCEEDED", "STOPPED", "FAILED")  # Ray's statuses of a submission whose entrypoint has exited
# Ray reports these when the job's node (with its supervisor actor) went away: the run was cut, not wrong.
NODE_LOST = ("JOB_SUPERVISOR_ACTOR_DIED",)


class RayError(DlguideError):
    """The Ray cluster cannot be used for this: not installed, not answering, or refusing the job."""


class RayAddressError(RayError, UsageError):
    """`--ray-address`/RAY_ADDRESS is not an http(s) URL: a usage error (exit 2)."""


@dataclass(frozen=True)
class RayJobState:
    """What Ray says about one submission, already in dlguide's words."""

    status: str  # a dlguide status (queued, running, succeeded, cancelled, failed, interrupted)
    ray_status: str  # Ray's own (PENDING, RUNNING, ...)
    message: str | None  # Ray's message (why it failed, what it waits for)


def resolve_address(address: str | None) -> str:
    """`--ray-address`, else RAY_ADDRESS; RayError in one line when neither is set or it is not an http(s) URL."""
    value = (address or os.environ.get(ADDRESS_ENV, "")).strip().rstrip("/")
    if not value:
        raise RayError("no Ray address: pass --ray-address http://HEAD:8265 or set RAY_ADDRESS")
    try:
        parts = split_url(value)
    except UrlError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.host.split(":")[0]:
        raise RayAddressError(f"Ray address {mask_url(value)!r} is not the job API's URL (like http://HEAD:8265)")
    return value


def is_loopback(address: str) -> bool:
    """True when the address names this machine (its workers then share our files and our SQLite store)."""
    host = urllib.parse.urlparse(address).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _no_proxy_for(address: str) -> None:
    # Ray's client uses requests/aiohttp, which read no_proxy from the environment: add a loopback head to it.
    if not is_loopback(address):
        return
    host = urllib.parse.urlparse(address).hostname or ""
    for key in ("no_proxy", "NO_PROXY"):
        names = [n for n in os.environ.get(key, "").split(",") if n.strip()]
        if host not in names:
            os.environ[key] = ",".join([*names, host])


def _get_json(address: str, path: str, timeout: float) -> Any:
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if is_loopback(address) else []))
    with opener.open(f"{address}{path}", timeout=timeout) as resp:
        return json.loads(resp.read())


def probe(address: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when Ray's job API answers at `address`; else the one-line reason (no Ray import needed)."""
    try:
        version = _get_json(address, "/api/version", timeout).get("ray_version")
    except (OSError, ValueError, AttributeError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return mask(f"Ray is not answering at {mask_url(address)} ({reason})")
    return None if version else f"{mask_url(address)} answered, but not as Ray's job API"


def cluster_gpus(address: str, timeout: float = CALL_TIMEOUT_S) -> float:
    """GPUs of the cluster's live nodes (Ray's state API); 0 when it cannot tell."""
    try:
        nodes = _get_json(address, "/api/v0/nodes?detail=1&limit=1000", timeout)["data"]["result"]["result"]
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0
    return sum(float((n.get("resources_total") or {}).get("GPU", 0)) for n in nodes if n.get("state") == "ALIVE")


def ray_importable() -> str | None:
    """None when ray[default]'s job client can be imported; else why not."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed here (pip install 'ray[default]')"
    return None


def client(address: str, timeout: float = CALL_TIMEOUT_S) -> Any:
    """A JobSubmissionClient whose every request gives up after `timeout` s; RayError when the head does not answer.
    One per address and timeout (its constructor checks the head's version: two requests); failures are not kept."""
    return _client(address, timeout)


@lru_cache(maxsize=8)
def _client(address: str, timeout: float) -> Any:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:
        raise RayError(f"Ray is not installed here ({exc}); pip install 'ray[default]'") from None

    class TimedJobClient(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout)
            return super()._do_request(method, endpoint, **kwargs)

    _no_proxy_for(address)
    try:
        return TimedJobClient(address)
    except Exception as exc:  # ConnectionError, requests' Timeout, RuntimeError from the version check
        raise RayError(mask(f"Ray is not answering at {mask_url(address)} ({error_summary(exc)})")) from None


def call(address: str, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S, **kwargs: Any) -> Any:
    """`client(address).method(*args, **kwargs)` with the deadline; any failure is one RayError line."""
    jobs = client(address, timeout)
    try:
        return getattr(jobs, method)(*args, **kwargs)
    except Exception as exc:
        raise RayError(mask(f"Ray at {mask_url(address)}: {method} failed ({error_summary(exc)})")) from None


def dlguide_status(ray_status: str, error_type: str | None = None) -> str:
    """Ray's status in dlguide's words: FAILED is `interrupted` when the node was lost (resumable), else `failed`."""
    if ray_status == "FAILED" and error_type in NODE_LOST:
        return "interrupted"
    return STATUS_MAP.get(ray_status, "running")


def job_state(address: str, submission_id: str, timeout: float = CALL_TIMEOUT_S) -> RayJobState:
    """Ray's view of one submission (RayError when the head is not answering or does not know it)."""
    info = call(address, "get_job_info", submission_id, timeout=timeout)
    ray_status = str(getattr(info.status, "value", info.status))
    error_type = getattr(info, "error_type", None)
    error_type = str(getattr(error_type, "value", error_type)) if error_type else None
    return RayJobState(dlguide_status(ray_status, error_type), ray_status, info.message)


