"""dlguide_core.network: the listen address and the Host allow-list's entries (issue 22)."""

from __future__ import annotations

import pytest

from dlguide_core.network import ServingRefused, allowed_hosts, configured_address, host_pattern, is_loopback


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("", False), ("::", False), ("192.0.2.1", False), ("dlguide.example.org", False),
])
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_the_address_defaults_to_loopback(monkeypatch) -> None:
    monkeypatch.delenv("DLGUIDE_ADDRESS", raising=False)
    assert configured_address() == "127.0.0.1"
    monkeypatch.setenv("DLGUIDE_ADDRESS", " 0.0.0.0 ")
    assert configured_address() == "0.0.0.0"


@pytest.mark.parametrize("entry, pattern", [
    ("Example.ORG", "example.org"), ("::1", "[::1]"), ("[::1]", "[::1]"), ("[FE80::1]", "[fe80::1]"),
    ("*.team.example", "*.team.example"), (" 10.0.0.5 ", "10.0.0.5"),
])
def test_host_patterns_as_the_host_header_carries_them(entry: str, pattern: str) -> None:
    assert host_pattern(entry) == pattern


@pytest.mark.parametrize("entry", ["*", "example.org:8501", "[::1]:8501", "http://example.org", "a.*.example",
                                   "*example.org", "user@example.org"])
def test_entries_that_can_never_match_are_refused(entry: str) -> None:
    with pytest.raises(ServingRefused, match="DLGUIDE_ALLOWED_HOSTS"):
        host_pattern(entry)


def test_allowed_hosts_default_only_on_loopback(monkeypatch) -> None:
    monkeypatch.delenv("DLGUIDE_ALLOWED_HOSTS", raising=False)
    assert allowed_hosts("127.0.0.1") == ["localhost", "127.0.0.1", "[::1]"]
    for network in ("0.0.0.0", "", "192.0.2.1"):
        with pytest.raises(ServingRefused, match="needs DLGUIDE_ALLOWED_HOSTS"):
            allowed_hosts(network)
    monkeypatch.setenv("DLGUIDE_ALLOWED_HOSTS", "gpu1.lab.example, 10.0.0.5")
    assert allowed_hosts("0.0.0.0") == ["gpu1.lab.example", "10.0.0.5"]


@pytest.mark.parametrize("raw", ["*.com", "*.", ",", "gpu1.lab.example, ,10.0.0.5", "gpu1.lab.example,", "*.lan",
                                 "gpu1..example", ".example.org"])
def test_host_lists_too_wide_or_with_empty_entries_are_refused(monkeypatch, raw: str) -> None:
    """Issue 33 (N13): `*.com` allows every .com name, `*.` and `,` are typos that used to pass."""
    monkeypatch.setenv("DLGUIDE_ALLOWED_HOSTS", raw)
    with pytest.raises(ServingRefused, match="DLGUIDE_ALLOWED_HOSTS") as refused:
        allowed_hosts("0.0.0.0")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("use_system_list", [False, True])
@pytest.mark.parametrize("raw", ["*.co.uk", "*.com.au", "*.CO.JP", "*.github.io", "gpu1.lab.example,*.org.uk"])
def test_a_wildcard_on_a_public_suffix_is_refused(monkeypatch, tmp_path, raw: str, use_system_list: bool) -> None:
    """Issue 43 (P10): `*.co.uk` passed the label count; public suffixes come from a list (the system's PSL where
    installed, else dlguide's own floor of the suffixes people meet), never the network."""
    from dlguide_core import public_suffixes

    if use_system_list and not public_suffixes.SYSTEM_LIST.is_file():
        pytest.skip("no system Public Suffix List here")
    monkeypatch.setenv(public_suffixes.LIST_ENV, str(public_suffixes.SYSTEM_LIST if use_system_list
                                                     else tmp_path / "none.dat"))
    monkeypatch.setenv("DLGUIDE_ALLOWED_HOSTS", raw)
    with pytest.raises(ServingRefused, match="is a public suffix") as refused:
        allowed_hosts("0.0.0.0")
    assert "\n" not in str(refused.value)
    monkeypatch.setenv("DLGUIDE_ALLOWED_HOSTS", "*.team.example.co.uk,*.lab.example.com.au,*.example.org")
    assert allowed_hosts("0.0.0.0") == ["*.team.example.co.uk", "*.lab.example.com.au", "*.example.org"]


def test_the_system_list_adds_suffixes_beyond_the_floor_with_its_wildcards_and_exceptions(monkeypatch,
                                                                                         tmp_path) -> None:
    from dlguide_core.public_suffixes import LIST_ENV, is_public_suffix

    psl = tmp_path / "psl.dat"
    psl.write_text("// comment\nexample-suffix.test\n*.ck\n!www.ck\n")
    monkeypatch.setenv(LIST_ENV, str(psl))
    assert is_public_suffix("example-suffix.test") and is_public_suffix("anything.ck")
    assert not is_public_suffix("www.ck") and not is_public_suffix("team.example-suffix.test")
    assert is_public_suffix("co.uk")  # the floor holds whatever list is read
