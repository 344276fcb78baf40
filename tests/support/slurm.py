"""A real single-node Slurm for tests: Debian's slurm-wlm + munge, on loopback, in a temp dir, stopped by pid.

`start_cluster(folder)` writes a slurm.conf (NodeName=localhost, every address 127.0.0.1, free ports, no
accounting, proctrack/linuxproc, task/none; see ../shared/SERVERS.md), makes sure a munged answers (one that
already runs is reused, else one is started as the `munge` user and left running for every later cluster of the
run: a system service, not one cluster's), starts slurmctld -D
and slurmd -D in the background and waits until the node is idle. `SlurmCluster.env` holds SLURM_CONF.
The node claims more CPUs than the box has (SlurmdParameters=config_overrides) so that the tests' jobs run side
by side instead of queueing behind each other on a 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

NODE_CPUS = 8
# The low partition's GraceTime. Labs use 10 s or more: Slurm then sends TERM to the job's steps at once and, at the
# next periodic check after the grace (up to 30 s later), TERM to every process and requeues it. 0 (the tests'
# default, to save CI time) requeues at once; the job's side is the same (DLGUIDE_TEST_SLURM_GRACE=10 to see).
GRACE_S = int(os.environ.get("DLGUIDE_TEST_SLURM_GRACE", "0"))
TOOLS = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "munged", "munge")


def missing_reason() -> str | None:
    """Why a real Slurm cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "a test Slurm needs root (munged as the munge user, slurmd)"
    missing = [t for t in TOOLS if not shutil.which(t) and not Path("/usr/sbin", t).exists()]
    if missing:
        return f"{', '.join(missing)} missing: install Debian's slurm-wlm and munge (make test does, as root)"
    return None


@dataclass
class SlurmCluster:
    folder: Path
    conf: Path
    partition: str = "debug"
    pids: list[int] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *argv: str, timeout: float = 20) -> str:
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout, check=True).stdout

    def stop(self) -> None:
        """Cancel every job of this cluster (their slurmstepd outlives slurmd), then stop what we started."""
        try:
            subprocess.run(["scancel", "--full", "--user", "root"], env={**os.environ, **self.env},
                           capture_output=True, timeout=10)
            _wait(lambda: not self.command("squeue", "-h", "-t", "RUNNING,COMPLETING", timeout=5).strip(), 40,
                  "the test jobs to end")
        except (OSError, subprocess.SubprocessError, RuntimeError):
            pass
        for pid in reversed(self.pids):
            _stop_pid(pid)
        self.pids.clear()


def _stop_pid(pid: int, wait: float = 10) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid if not Path(f"/proc/{pid}").exists() else 0
        if done == pid:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


FAKE_GPUS = 2


def _gres_lines(folder: Path, flags: str | None) -> list[str]:
    """GPUs through gres with no GPU (SERVERS.md): character devices this test makes, declared in gres.conf
    (AutoDetect=off; Flags=amd_gpu_env: Slurm binds them with ROCR_VISIBLE_DEVICES; no flags: CUDA_VISIBLE_DEVICES
    and the others), so the binding is Slurm's."""
    for index in range(FAKE_GPUS):
        device = folder / f"fakegpu{index}"
        if not device.exists():
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(195, index))
    (folder / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={folder}/fakegpu[0-{FAKE_GPUS - 1}]"
                                      + (f" Flags={flags}" if flags else "") + "\n")
    return ["GresTypes=gpu"]


def _conf_text(folder: Path, ctld_port: int, slurmd_port: int, gpus: bool = False,
               gpu_flags: str | None = "amd_gpu_env") -> str:
    lines = [
        "ClusterName=dlguidetest", "SlurmctldHost=localhost(127.0.0.1)", "AuthType=auth/munge", "SlurmUser=root",
        f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none", "MinJobAge=600",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SlurmdParameters=config_overrides", "KillWait=90", "SchedulerParameters=sched_interval=2",
        # KillWait: a loaded CI box may need long for the step a stopping job finishes before its checkpoint.
        # Preemption as labs run it (SERVERS.md): a job on `high` takes a `low` job's CPUs; the low job gets TERM
        # after GraceTime (kept short here), then Slurm requeues it. `debug` (the default) is never preempted.
        "PreemptType=preempt/partition_prio", "PreemptMode=REQUEUE", "JobRequeue=1",
        "AuthInfo=cred_expire=5",  # a requeued job waits this long (default 120 s) before it runs again
        f"StateSaveLocation={folder / 'state'}", f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}", f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}", f"SlurmdLogFile={folder / 'slurmd.log'}",
        *(_gres_lines(folder, gpu_flags) if gpus else []),
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory=8000 State=UNKNOWN"
        + (f" Gres=gpu:{FAKE_GPUS}" if gpus else ""),
        "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP PriorityTier=2",
        f"PartitionName=low Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=1 GraceTime={GRACE_S}",
        "PartitionName=high Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=2",
    ]
    return "\n".join(lines) + "\n"


def _munge_answers() -> bool:
    try:
        token = subprocess.run(["munge", "-n"], capture_output=True, timeout=5, check=True).stdout
        return subprocess.run(["unmunge"], input=token, capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _ensure_munged(cluster: SlurmCluster) -> None:
    if _munge_answers():
        return  # someone's munged already serves this machine: share it
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    # Left running once started, as the system service it is: clusters of one run share it (the suite's, a bench's
    # --quick one, the hosts' namespaces), and the first to stop would otherwise take it from the others mid-job.
    subprocess.Popen(["runuser", "-u", "munge", "--", "/usr/sbin/munged", "--foreground"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _wait(_munge_answers, 15, "munged to answer")


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.3)


def start_cluster(folder: Path, gpus: bool = False, gpu_flags: str | None = "amd_gpu_env") -> SlurmCluster:
    """A running single-node cluster in `folder`; call .stop() when done (it stops only what it started).
    `gpus`: the node has FAKE_GPUS gres GPUs (device files in `folder`), declared with `gpu_flags` (None: none)."""
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    conf = folder / "slurm.conf"
    conf.write_text(_conf_text(folder, free_port(), free_port(), gpus, gpu_flags))
    cluster = SlurmCluster(folder, conf)
    try:
        _ensure_munged(cluster)
        env = {**os.environ, **cluster.env}
        for daemon in ("slurmctld", "slurmd"):
            log = open(folder / f"{daemon}.out", "wb")
            proc = subprocess.Popen([f"/usr/sbin/{daemon}", "-D", "-f", str(conf)], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            cluster.pids.append(proc.pid)
        _wait(lambda: _node_idle(cluster), 60, f"the Slurm node to be idle (logs in {folder})")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def serving(folder: Path, gpus: bool = False, gpu_flags: str | None = "amd_gpu_env") -> Iterator[SlurmCluster]:
    """start_cluster(...) with SLURM_CONF pointing at it meanwhile; afterwards the cluster is stopped and
    SLURM_CONF is what it was (unset when it was unset)."""
    cluster = start_cluster(folder, gpus, gpu_flags)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        cluster.stop()
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous


def _node_idle(cluster: SlurmCluster) -> bool:
    try:
        return cluster.command("sinfo", "-h", "-o", "%t", timeout=5).strip() == "idle"
    except (subprocess.SubprocessError, OSError):
        return False
