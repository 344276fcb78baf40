"""A real, throwaway PostgreSQL server for tests: Debian's binaries run as the `postgres` user.

Password auth over loopback TCP (scram-sha-256, not trust: a URL that lost its password must fail),
a data dir in a temp folder, a free port, a test role owning its databases. Stopped by PID.
`ServerOutage` is a real outage (`pg_ctl stop -m fast`, then `start`) for resilience tests.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.ports import free_port

ROLE = "dlguide_test"


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None."""
    if os.geteuid() != 0:
        return "PostgreSQL tests start a server as the postgres user: run them as root"
    if binaries() is None:
        return "PostgreSQL is not installed (Debian's `postgresql`; `make test` installs it as root)"
    if shutil.which("runuser") is None:
        return "runuser is missing"
    return None


class PostgresServer:
    """initdb + pg_ctl start in a fresh folder; `url(db)` for a database owned by the test role."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.root = Path(tempfile.mkdtemp(prefix="dlguide-pg-"))
        self.data, self.sock, self.log = self.root / "data", self.root / "sock", self.root / "server.log"
        self.port = free_port()
        self.password = secrets.token_urlsafe(12)
        self._databases = 0

    def _as_postgres(self, *argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", "postgres", "--", *argv], cwd=self.root, check=check,
                              capture_output=True, text=True, timeout=120, **kw)

    def start(self) -> PostgresServer:
        self.root.chmod(0o755)
        self.sock.mkdir()
        shutil.chown(self.root, "postgres")
        shutil.chown(self.sock, "postgres")
        pwfile = self.root / "pw"
        pwfile.write_text(secrets.token_urlsafe(16))
        shutil.chown(pwfile, "postgres")
        self._as_postgres(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth-local=peer",
                          "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8")
        self._ctl("start")
        self.psql(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{self.password}'")
        return self

    def _ctl(self, action: str) -> None:
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off"
        args = ["-m", "fast"] if action == "stop" else ["-o", opts, "-l", str(self.log)]
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), *args, "-w", action)

    def stop_server(self) -> None:
        """A real outage: the server stops (fast: clients are disconnected)."""
        self._ctl("stop")

    def start_server(self) -> None:
        self._ctl("start")

    def psql(self, sql: str, db: str = "postgres") -> str:
        done = self._as_postgres(str(self.bin / "psql"), "-h", str(self.sock), "-p", str(self.port), "-d", db,
                                 "-v", "ON_ERROR_STOP=1", "-qAtc", sql)
        return done.stdout

    def create_database(self) -> str:
        """A fresh empty database owned by the test role; returns its URL (with the password)."""
        self._databases += 1
        name = f"dlguide_{self._databases}"
        self.psql(f"CREATE DATABASE {name} OWNER {ROLE}")
        return self.url(name)

    def url(self, db: str, password: str | None = None) -> str:
        return f"postgresql://{ROLE}:{password or self.password}@127.0.0.1:{self.port}/{db}"

    def pid(self) -> int | None:
        pidfile = self.data / "postmaster.pid"
        return int(pidfile.read_text().split()[0]) if pidfile.is_file() else None

    def close(self) -> None:
        if self.pid() is not None:
            self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                              check=False)
        shutil.rmtree(self.root, ignore_errors=True)
