"""Who may reach the served app (issue 22): the listen address and the Host names it answers.

DLGUIDE_ADDRESS (default 127.0.0.1) is where serve.py listens unless `--server.address` is given;
DLGUIDE_ALLOWED_HOSTS (comma-separated, default localhost,127.0.0.1,[::1]) are the Host names it answers.
A network address (not loopback) without DLGUIDE_ALLOWED_HOSTS is refused: the default list would turn away
every visitor from elsewhere, and allowing any name would open the app to DNS rebinding.
"""

from __future__ import annotations

import ipaddress
import os

from dlguide_core.errors import DlguideError
from dlguide_core.public_suffixes import is_public_suffix

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_ALLOWED_HOSTS = "localhost,127.0.0.1,[::1]"


class ServingRefused(DlguideError):
    """A listen address or host list the app will not serve with."""


def configured_address() -> str:
    return os.environ.get("DLGUIDE_ADDRESS", "").strip() or DEFAULT_ADDRESS


def is_loopback(address: str) -> bool:
    """True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost); "" and 0.0.0.0 mean every
    interface, and a host name or an interface's address is reachable from a network."""
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def host_pattern(entry: str) -> str:
    """One allowed-hosts entry as a Host header carries it: lower case, an IPv6 literal in brackets (Starlette
    compares the host part with its brackets, the port stripped). ServingRefused for what can never match a
    Host (a port, a scheme, a path) and for a bare "*" (every name: no allow-list at all)."""
    host = entry.strip().lower()
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        if ipaddress.ip_address(literal).version == 6:
            return f"[{literal}]"
    except ValueError:
        pass
    wildcard_ok = "*" not in host[1:] and (not host.startswith("*") or host.startswith("*."))
    if host == "*" or not wildcard_ok or any(c in host for c in ":/[]@ "):
        raise ServingRefused(f"DLGUIDE_ALLOWED_HOSTS entry {entry.strip()!r} is not a host name: no port, scheme "
                             f"or bare '*' ('*.example.org' and '[::1]' are fine)")
    labels = host.removeprefix("*.").split(".")
    if "" in labels or (host.startswith("*.") and len(labels) < 2):  # "*.com": every name under a suffix
        raise ServingRefused(f"DLGUIDE_ALLOWED_HOSTS entry {entry.strip()!r} is too wide or not a name: a wildcard "
                             f"needs a domain of two labels or more ('*.team.example.org'), and no label is empty")
    if host.startswith("*.") and is_public_suffix(host[2:]):  # "*.co.uk": every stranger's domain (public_suffixes)
        raise ServingRefused(f"DLGUIDE_ALLOWED_HOSTS entry {entry.strip()!r} is too wide: {host[2:]} is a public "
                             f"suffix, where anyone registers names; name your own domain ('*.team.example.co.uk')")
    return host


def allowed_hosts(address: str) -> list[str]:
    """The Host names served at `address`: DLGUIDE_ALLOWED_HOSTS, or the loopback names on a loopback address."""
    raw = os.environ.get("DLGUIDE_ALLOWED_HOSTS", "").strip()
    if not raw:
        if not is_loopback(address):
            raise ServingRefused(f"serving to a network (address {address or 'every interface'!r}) needs "
                                 f"DLGUIDE_ALLOWED_HOSTS: the comma-separated host names visitors use")
        raw = DEFAULT_ALLOWED_HOSTS
    if any(not entry.strip() for entry in raw.split(",")):  # "a,,b", a trailing ",": a typo, said, not skipped
        raise ServingRefused(f"DLGUIDE_ALLOWED_HOSTS {raw!r} has an empty entry: host names separated by single commas")
    return [host_pattern(entry) for entry in raw.split(",")]
