"""Two Slurm "hosts" on one machine: network namespaces with their own addresses, host names and slurmd.

`start_hosts(folder)` makes three network namespaces joined by a bridge (10.77.X.0/24, addresses of the
test's own choosing, reachable only inside them): `ctl` (slurmctld, and a PostgreSQL job store listening on
the bridge), `n1` and `n2` (one slurmd each, the compute nodes). Each process runs in its namespace with its own
host name (a UTS namespace) and an /etc/hosts naming the three, bind-mounted in a private mount namespace.
The file system is shared, as a cluster's shared file system would be. `nsenter --net` is used rather than
`ip netns exec`, which remounts /sys and so hides the cgroup file system slurmd needs. `stop()` ends everything
by pid and removes the namespaces.

A node dies as a host would (`kill_node`: SIGKILL to every process in its network namespace, slurmd, slurmstepd
and the job's processes alike) and comes back (`restore_node`: its slurmd again). slurmctld declares a node that
stopped answering DOWN after SlurmdTimeout (kept short here, as MessageTimeout), requeues the jobs that ran on
it, and takes it back once its slurmd registers again (ReturnToService=2).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.slurm import _munge_answers, _stop_pid, _wait

PG_BIN = Path("/usr/lib/postgresql/15/bin")
NODES = ("n1", "n2")


def missing_reason() -> str | None:
    from tests.support.slurm import missing_reason as slurm_missing

    if reason := slurm_missing():
        return reason
    if not all(shutil.which(t) for t in ("ip", "nsenter", "unshare", "runuser")) or not (PG_BIN / "pg_ctl").exists():
        return "needs ip, nsenter, unshare and PostgreSQL 15 (Debian's postgresql)"
    if not _munge_answers():
        return "munged is not running (the single-node Slurm fixture starts it)"
    return None


@dataclass
class SlurmHosts:
    folder: Path
    tag: str
    subnet: int
    pg: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dlguide-hosts-pg-")))
    pids: list[int] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)

    def ns(self, name: str) -> str:
        return f"dlg{self.tag}-{name}"

    def addr(self, name: str) -> str:
        return f"10.77.{self.subnet}.{ {'ctl': 1, 'n1': 11, 'n2': 12}[name]}"

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    @property
    def store_url(self) -> str:
        return f"postgresql://dl:{self.tag}pw@{self.addr('ctl')}:5432/dlguide"

    def run_in(self, name: str, argv: list[str], env: dict[str, str] | None = None,
               **kwargs) -> subprocess.CompletedProcess:
        """A command on host `name` (its network, its host name)."""
        return subprocess.run(self._wrap(name, argv), env={**os.environ, "SLURM_CONF": str(self.conf), **(env or {})},
                              **kwargs)

    def popen_in(self, name: str, argv: list[str], env: dict[str, str] | None = None,
                 **kwargs) -> subprocess.Popen:
        """A command on host `name`, left running (its pid is the command's: every wrapper execs)."""
        return subprocess.Popen(self._wrap(name, argv), env={**os.environ, "SLURM_CONF": str(self.conf),
                                                              **(env or {})}, **kwargs)

    def _wrap(self, name: str, argv: list[str]) -> list[str]:
        hosts = self.folder / "hosts"
        script = f'hostname {name} && mount --bind {hosts} /etc/hosts && exec "$@"'
        return ["nsenter", f"--net=/var/run/netns/{self.ns(name)}", "unshare", "--uts", "--mount", "sh", "-c",
                script, "sh", *argv]

    def start_daemon(self, name: str, argv: list[str], log: str) -> None:
        out = open(self.folder / log, "wb")  # noqa: SIM115 - kept open by the daemon
        proc = subprocess.Popen(self._wrap(name, argv), env={**os.environ, "SLURM_CONF": str(self.conf)},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pids.append(proc.pid)

    def node_state(self, name: str) -> set[str]:
        """The node's state and flags as slurmctld holds them ({"DOWN", "COMPLETING", "NOT_RESPONDING"}, ...;
        empty when scontrol does not answer)."""
        done = self.run_in("ctl", ["scontrol", "show", "node", name, "-o"], capture_output=True, text=True,
                           timeout=30)
        found = re.search(r"\bState=(\S+)", done.stdout)
        return set(found[1].split("+")) if found else set()

    def kill_node(self, name: str) -> list[str]:
        """The host dies: SIGKILL to every process in its network namespace at once. Returns what they were."""
        pids = [int(p) for p in subprocess.run(["ip", "netns", "pids", self.ns(name)], capture_output=True,
                                               text=True, check=True).stdout.split()]
        killed = [_command_line(pid) for pid in pids]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in set(pids) & set(self.pids):  # our slurmd: reaped here, and not stopped again
            self.pids.remove(pid)
            os.waitpid(pid, 0)
        _wait(lambda: not subprocess.run(["ip", "netns", "pids", self.ns(name)], capture_output=True,
                                         text=True).stdout.split(), 30, f"the processes of {name} to die")
        return killed

    def restore_node(self, name: str) -> None:
        """The host is back: its slurmd starts again (with its own log beside the first one's)."""
        self.start_daemon(name, ["/usr/sbin/slurmd", "-D", "-N", name, "-f", str(self.conf)], f"{name}-restored.out")

    def stop(self) -> None:
        try:
            self.run_in("ctl", ["scancel", "--full", "--user", "root"], capture_output=True, timeout=10)
            time.sleep(2)
        except (OSError, subprocess.SubprocessError):
            pass
        for pid in reversed(self.pids):
            _stop_pid(pid)
        self.pids.clear()
        data = self.pg / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast",
                            "stop"], capture_output=True, timeout=60)
        for ns in self.netns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.netns.clear()
        shutil.rmtree(self.pg, ignore_errors=True)


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"(pid {pid}, gone)"


def _network(hosts: SlurmHosts) -> None:
    ip = ["ip"]
    for name in ("ctl", *NODES):
        subprocess.run([*ip, "netns", "add", hosts.ns(name)], check=True)
        hosts.netns.append(hosts.ns(name))
        subprocess.run([*ip, "-n", hosts.ns(name), "link", "set", "lo", "up"], check=True)
    ctl = hosts.ns("ctl")
    subprocess.run([*ip, "-n", ctl, "link", "add", "br0", "type", "bridge"], check=True)
    subprocess.run([*ip, "-n", ctl, "addr", "add", f"{hosts.addr('ctl')}/24", "dev", "br0"], check=True)
    subprocess.run([*ip, "-n", ctl, "link", "set", "br0", "up"], check=True)
    for node in NODES:
        subprocess.run([*ip, "link", "add", f"v{hosts.tag}{node}", "netns", ctl, "type", "veth", "peer", "name", "eth0",
                        "netns", hosts.ns(node)], check=True)
        subprocess.run([*ip, "-n", ctl, "link", "set", f"v{hosts.tag}{node}", "master", "br0"], check=True)
        subprocess.run([*ip, "-n", ctl, "link", "set", f"v{hosts.tag}{node}", "up"], check=True)
        subprocess.run([*ip, "-n", hosts.ns(node), "addr", "add", f"{hosts.addr(node)}/24", "dev", "eth0"], check=True)
        subprocess.run([*ip, "-n", hosts.ns(node), "link", "set", "eth0", "up"], check=True)
    (hosts.folder / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
        f"{hosts.addr(n)} {n}\n" for n in ("ctl", *NODES)))


def _postgres(hosts: SlurmHosts) -> None:
    pg = hosts.pg  # outside pytest's 0700 temp folders: the postgres user must reach it
    os.chmod(pg, 0o755)
    (pg / "sock").mkdir(parents=True)
    (pg / "pw").write_text("init\n")
    shutil.chown(pg, "postgres", "postgres")
    for sub in ("sock", "pw"):
        shutil.chown(pg / sub, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(pg / "data"), "-A", "scram-sha-256",
                    f"--pwfile={pg / 'pw'}", "-U", "postgres"], check=True, capture_output=True, cwd=pg)
    with open(pg / "data" / "pg_hba.conf", "a") as fh:
        fh.write(f"host all all 10.77.{hosts.subnet}.0/24 scram-sha-256\n")
    options = f"-p 5432 -k {pg / 'sock'} -c listen_addresses={hosts.addr('ctl')}"
    subprocess.run(["nsenter", f"--net=/var/run/netns/{hosts.ns('ctl')}", *as_pg, str(PG_BIN / "pg_ctl"), "-D",
                    str(pg / "data"), "-o", options, "-l", str(pg / "log"), "-w", "start"], check=True,
                   capture_output=True, cwd=pg)
    sql = [f"CREATE ROLE dl LOGIN PASSWORD '{hosts.tag}pw'", "CREATE DATABASE dlguide OWNER dl"]
    subprocess.run([*as_pg, "psql", "-h", str(pg / "sock"), "-p", "5432", "-U", "postgres",
                    *[a for s in sql for a in ("-c", s)]], check=True, capture_output=True, cwd=pg,
                   env={**os.environ, "PGPASSWORD": "init"})


def _conf(hosts: SlurmHosts) -> None:
    f = hosts.folder
    lines = [
        "ClusterName=dlgmulti", f"SlurmctldHost=ctl({hosts.addr('ctl')})", "AuthType=auth/munge", "SlurmUser=root",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none", "MinJobAge=600",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SlurmdParameters=config_overrides", "SchedulerParameters=sched_interval=2",
        # A dead node is declared DOWN (its jobs requeued) once it has not answered for SlurmdTimeout (default 300 s)
        # at one of slurmctld's pings (every third of it). A failed ping takes MessageTimeout: DOWN came 28 s after
        # the kill here with its default (10 s), SlurmdTimeout 5 or 10 alike, and 17 s with 5 s (still far above
        # what an answer takes on a loaded box). A requeued job waits cred_expire (default 120 s) to run again.
        "SlurmdTimeout=10", "MessageTimeout=5", "AuthInfo=cred_expire=5",
        f"StateSaveLocation={f / 'state'}", f"SlurmdSpoolDir={f / 'spool'}/%n",
        f"SlurmctldPidFile={f / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={f / 'slurmctld.log'}", f"SlurmdLogFile={f / 'slurmd-%n.log'}",
        *[f"NodeName={n} NodeAddr={hosts.addr(n)} CPUs=2 RealMemory=4000 State=UNKNOWN" for n in NODES],
        f"PartitionName=multi Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP",
    ]
    (f / "state").mkdir()
    for node in NODES:
        (f / "spool" / node).mkdir(parents=True)
    hosts.conf.write_text("\n".join(lines) + "\n")


def start_hosts(folder: Path) -> SlurmHosts:
    folder.mkdir(parents=True, exist_ok=True)
    hosts = SlurmHosts(folder, secrets.token_hex(2), 100 + secrets.randbelow(100))
    try:
        _network(hosts)
        _postgres(hosts)
        _conf(hosts)
        hosts.start_daemon("ctl", ["/usr/sbin/slurmctld", "-D", "-f", str(hosts.conf)], "slurmctld.out")
        for node in NODES:
            hosts.start_daemon(node, ["/usr/sbin/slurmd", "-D", "-N", node, "-f", str(hosts.conf)], f"{node}.out")

        def idle() -> bool:
            done = hosts.run_in("ctl", ["sinfo", "-h", "-o", "%t %D"], capture_output=True, text=True, timeout=10)
            return done.stdout.split() == ["idle", "2"]

        _wait(idle, 60, f"two idle nodes (logs in {folder})")
    except BaseException:
        hosts.stop()
        raise
    return hosts
