"""N10: one URL parser hides every secret of a URL however it is written (a raw `@` or space in the password, a
`?password=` parameter, a URL it cannot read), in `store info --json`, `jobs list`, errors and Ray addresses;
it decides what Ray may see; `store copy` takes its target from the environment or stdin, never argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlguide_core.errors import StoreError
from dlguide_core.jobs.executors import ray_client, ray_env
from dlguide_core.jobs.store_url import mask, mask_url, store_url
from tests.support.paths import ROOT

FORMS = {  # password "p@ss w0rd!" written as people write it
    "raw @ and space": "postgresql://{user}:p@ss w0rd!@127.0.0.1:{port}/{db}",
    "query parameter": "postgresql://{user}@127.0.0.1:{port}/{db}?password=p@ss w0rd!",
    "encoded": "postgresql://{user}:p%40ss%20w0rd%21@127.0.0.1:{port}/{db}",
}
FRAGMENTS = ("p@ss", "ss w0rd", "w0rd", "p%40ss", "ssAt")


def _leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


def test_every_form_of_a_password_is_masked_and_nothing_of_it_remains() -> None:
    assert mask_url("postgresql://u:p@ssAt@db:5432/x") == "postgresql://u:***@db:5432/x"  # was u:***@ssAt@db
    assert mask_url("postgresql://u@db/x?sslmode=require&password=p@ss") == "postgresql://u@db/x?sslmode=require&password=***"
    assert mask_url("postgresql://u:p ss@db/x") == "postgresql://u:***@db/x"
    assert mask_url("postgresql://u:a/b@db:notaport/x") == "postgresql://***"  # unreadable: the scheme alone
    assert mask_url("http://user:secret@head:8265") == "http://user:***@head:8265"
    text = mask("failed at postgresql://u:p@ssAt@db/x?password=z9z9 (libpq: password=q8q8 host=db)")
    assert "db/x" in text and "ssAt" not in text and "z9z9" not in text and "q8q8" not in text


def test_an_unreadable_store_url_is_one_line_without_its_text() -> None:
    with pytest.raises(StoreError) as err:
        store_url("postgresql://u:sec ret@db:port x/x")
    assert "sec" not in str(err.value) and "ret" not in str(err.value) and "postgresql://***" in str(err.value)


def test_a_password_in_a_query_or_an_unreadable_url_never_travels_to_ray(isolated_home) -> None:
    for url in ("postgresql://u@db/x?password=pw123", "postgresql://u:pw123@db/x", "postgresql://u:pw 123@db:x/x"):
        env = ray_env.runtime_env({"DLGUIDE_STORE_URL": url})["env_vars"]
        assert "DLGUIDE_STORE_URL" not in env and "pw" not in repr(env), url


def test_a_ray_address_with_a_password_is_masked_and_a_bad_scheme_is_a_usage_error() -> None:
    reason = ray_client.probe("http://user:s3cret@127.0.0.1:9", timeout=2)
    assert reason and "s3cret" not in reason and "user:***@127.0.0.1:9" in reason
    done = _cli("train", "--recipe", "cifar_net", "--data", str(ROOT), "--executor", "ray", "--ray-address", "ftp://x",
                "--detach")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def _cli(*argv: str, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlguide_core", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, input=stdin)


@pytest.fixture(scope="module")
def odd_role(postgres_server) -> str:
    """A role whose password has an `@`, a space and a `!`, owning a fresh database with one job; its name."""
    role = "dlguide_odd"
    postgres_server.psql(f"CREATE ROLE {role} LOGIN PASSWORD 'p@ss w0rd!'")
    postgres_server.psql(f"CREATE DATABASE {role} OWNER {role}")
    return role


@pytest.mark.parametrize("form", list(FORMS))
def test_store_info_and_jobs_list_connect_and_show_no_part_of_the_password(form, odd_role, postgres_server,
                                                                           tmp_path: Path) -> None:
    """A real server with scram-sha-256 over TCP: the URL works however the password is written, and no output
    holds any part of it."""
    url = FORMS[form].format(user=odd_role, port=postgres_server.port, db=odd_role)
    env = {"DLGUIDE_STORE_URL": url, "DLGUIDE_HOME": str(tmp_path)}
    info = _cli("store", "info", "--json", env=env)
    assert info.returncode == 0, info.stderr
    shown = json.loads(info.stdout)["url"]
    assert shown.startswith(f"postgresql://{odd_role}") and "***" in shown and not _leaks(shown)
    listed = _cli("jobs", "list", env=env)
    assert listed.returncode == 0 and not _leaks(listed.stdout + listed.stderr), listed.stderr
    wrong = _cli("jobs", "list", env={**env, "DLGUIDE_STORE_URL": url.replace("w0rd", "w1rd").replace("%21", "")})
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert not _leaks(wrong.stderr) and "w1rd" not in wrong.stderr


def test_store_copy_takes_its_target_from_the_environment_or_stdin_and_warns_about_argv(postgres_server,
                                                                                      tmp_path: Path) -> None:
    env = {"DLGUIDE_HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", "from dlguide_core.jobs.store import JobStore; "
                    "JobStore().create('cifar_net', 'pytorch', {})"], cwd=ROOT, env={**os.environ, **env}, check=True)
    first, second, third = (postgres_server.create_database() for _ in range(3))
    by_env = _cli("store", "copy", env={**env, "DLGUIDE_STORE_COPY_TO": first})
    assert by_env.returncode == 0 and by_env.stdout.startswith("copied 1 jobs") and by_env.stderr == ""
    by_stdin = _cli("store", "copy", "--to", "-", env=env, stdin=second + "\n")
    assert by_stdin.returncode == 0 and by_stdin.stdout.startswith("copied 1 jobs") and by_stdin.stderr == ""
    by_argv = _cli("store", "copy", "--to", third, env=env)
    assert by_argv.returncode == 0 and by_argv.stdout.startswith("copied 1 jobs")
    assert by_argv.stderr.startswith("warning: --to puts the URL in this command's argv") and \
        by_argv.stderr.count("\n") == 1
    assert postgres_server.password not in by_env.stdout + by_stdin.stdout + by_argv.stdout + by_argv.stderr
    neither = _cli("store", "copy", env=env)
    assert neither.returncode == 2 and "DLGUIDE_STORE_COPY_TO" in neither.stderr
