"""A real Slurm 22.05 on this machine: munged, slurmctld, and two slurmd (n1, n2, one CPU each, a port each)
in one folder; two partitions, `low` (the default, preemptible with REQUEUE) and `high`. Every daemon is
stopped by its pid. Facts: ../shared/reference/clusters/slurm-on-one-machine.md.

Two kinds, as clusters come: without an accounting database (sacct reads the completion log, `sacct -c`;
munged on a socket of its own), and with one (`accounting=True`: slurmdbd on this machine's MariaDB, a
database of its own, dropped at the end). slurmdbd 22.05 ignores `AuthInfo=socket=` and always asks munge
at its default socket, so an accounted cluster's munged listens there (one such cluster at a time).
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.sshd import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sacct", "scancel", "scontrol")
DEFAULT_MUNGE = Path("/run/munge/munge.socket.2")
MARIADB = ("127.0.0.1", 3306)


def missing(accounting: bool = False) -> list[str]:
    names = (*DAEMONS, "slurmdbd", "mariadb") if accounting else DAEMONS
    return [name for name in names if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists()]


class SlurmCluster:
    def __init__(self, directory: Path, accounting: bool = False):
        self.dir, self.accounting = directory, accounting
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf = self.dir / "slurm.conf"
        self.host = socket.gethostname()
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> "SlurmCluster":
        began = time.monotonic()
        self._munged()
        self._write_conf()
        (self.dir / "state").mkdir(exist_ok=True)
        if self.accounting:
            self._slurmdbd()
        subprocess.run(["slurmctld", "-f", str(self.conf), "-i"], check=True, env=self.env)
        for node in ("n1", "n2"):
            subprocess.run(["slurmd", "-f", str(self.conf), "-N", node], check=True, env=self.env)
        self.wait(lambda: "idle 2" in self.run("sinfo", "-h", "-p", "low", "-o", "%T %D"), 30, "two idle nodes")
        self.started_in = time.monotonic() - began
        return self

    def _munged(self) -> None:
        key = self.dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        self.socket = self.dir / "munge.socket"
        if self.accounting:
            self.socket = DEFAULT_MUNGE
            self.socket.parent.mkdir(parents=True, exist_ok=True)
            _stop_pidfile(self.socket.parent / "rgpu-tests.pid")  # one a killed session left, by its pid
        paths = {"key-file": key, "socket": self.socket, "pid-file": self._munge_pidfile()}
        paths |= {"log-file": self.dir / "munged.log", "seed-file": self.dir / "munged.seed"}
        subprocess.run(["munged", "--force", *(f"--{name}={path}" for name, path in paths.items())], check=True)

    def _munge_pidfile(self) -> Path:
        return self.socket.parent / "rgpu-tests.pid" if self.accounting else self.dir / "munged.pid"

    def _slurmdbd(self) -> None:
        """slurmdbd on a database of its own; it reads slurmdbd.conf (mode 0600) beside SLURM_CONF."""
        self.database = f"slurm_rgpu_{os.getpid()}_{self.dbd_port}"
        _mariadb(f"DROP DATABASE IF EXISTS {self.database}; CREATE DATABASE {self.database}")
        conf = self.dir / "slurmdbd.conf"
        lines = ["AuthType=auth/munge", "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={self.dbd_port}"]
        lines += ["SlurmUser=root", f"PidFile={self.dir}/slurmdbd.pid", f"LogFile={self.dir}/slurmdbd.log"]
        lines += ["StorageType=accounting_storage/mysql", f"StorageHost={MARIADB[0]}", f"StoragePort={MARIADB[1]}"]
        lines += ["StorageUser=root", f"StorageLoc={self.database}", ""]  # no StoragePass= line: empty is an error
        conf.write_text("\n".join(lines))
        conf.chmod(0o600)
        subprocess.run(["slurmdbd"], check=True, env=self.env)
        self.wait(lambda: _listening(self.dbd_port), 30, "slurmdbd listening")

    def _write_conf(self) -> None:
        d, ports = self.dir, [free_port() for _ in range(3)]
        self.dbd_port = free_port()
        if self.accounting:
            accounting = ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1"]
            accounting.append(f"AccountingStoragePort={self.dbd_port}")
        else:
            accounting = ["AccountingStorageType=accounting_storage/none"]
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=rgpu",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    f"SlurmctldPort={ports[0]}",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.socket}",
                    "CredType=cred/munge",
                    "SlurmUser=root",
                    f"StateSaveLocation={d}/state",
                    f"SlurmdSpoolDir={d}/d-%n",
                    f"SlurmctldPidFile={d}/slurmctld.pid",
                    f"SlurmdPidFile={d}/slurmd-%n.pid",
                    f"SlurmctldLogFile={d}/slurmctld.log",
                    f"SlurmdLogFile={d}/slurmd-%n.log",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "ReturnToService=2",
                    "JobRequeue=1",
                    # TERM, then KILL this long after: the wrapper quarantines the attempt in between (5 s was short
                    # on a loaded 2-core machine: once the KILL came before the markers had moved).
                    "KillWait=10",
                    "MinJobAge=5",  # a finished job leaves squeue soon: sacct is asked after it
                    "SlurmdTimeout=10",
                    # The main scheduling pass every second (60 s by default): a job released from its
                    # requeue hold (StartTime=now+3) starts when eligible, not at the next minute.
                    "SchedulerParameters=sched_interval=1",
                    "JobAcctGatherType=jobacct_gather/linux",
                    *accounting,
                    "JobCompType=jobcomp/filetxt",
                    f"JobCompLoc={d}/jobcomp.txt",
                    "PreemptType=preempt/partition_prio",
                    "PreemptMode=REQUEUE",
                    "MpiDefault=none",
                    f"TaskProlog={self._task_prolog()}",
                    *(
                        f"NodeName={node} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={port} CPUs=1 State=UNKNOWN"
                        for node, port in (("n1", ports[1]), ("n2", ports[2]))
                    ),
                    "PartitionName=low Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP PriorityTier=1 "
                    "PreemptMode=REQUEUE GraceTime=5",
                    "PartitionName=high Nodes=n1,n2 MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF",
                    "",
                ]
            )
        )

    def _task_prolog(self) -> Path:
        """Before each task: where a test made a node's environment differ (differ()), another torch comes
        first on that node's path, as on a node whose image was built apart."""
        other = self.dir / "other-torch" / "torch"
        other.mkdir(parents=True, exist_ok=True)
        (other / "__init__.py").write_text(
            '__version__ = "0.0.1+other"\n\nclass cuda:\n    is_available = staticmethod(lambda: False)\n'
        )
        prolog = self.dir / "task-prolog.sh"
        prolog.write_text(
            "#!/bin/sh\n"
            f'if [ -f "{self.dir}/differ-$SLURMD_NODENAME" ]; then echo "export PYTHONPATH={other.parent}"; fi\n'
        )
        prolog.chmod(0o755)
        return prolog

    @contextlib.contextmanager
    def differ(self, node: str):
        """The node's tasks find another torch until the block ends."""
        marker = self.dir / f"differ-{node}"
        marker.touch()
        try:
            yield
        finally:
            marker.unlink()

    @contextlib.contextmanager
    def stalled(self):
        """slurmctld stopped (SIGSTOP) until the block ends: a controller too busy to answer, as a cluster
        under load is (squeue: "Socket timed out on send/recv operation" after twice MessageTimeout)."""
        pid = int((self.dir / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def run(self, *argv: str, check: bool = True) -> str:
        result = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")
        return result.stdout

    def state_of(self, job: str) -> str:
        return self.run("squeue", "-h", "-j", job, "-o", "%T", check=False).strip()

    @staticmethod
    def wait(predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm: no {what} within {timeout} s")
            time.sleep(0.1)

    def cancel_all(self) -> None:
        self.run("scancel", "--user", "root", check=False)

    def stop(self) -> None:
        self.cancel_all()
        for name in ("slurmd-n1.pid", "slurmd-n2.pid", "slurmctld.pid", "slurmdbd.pid"):
            _stop_pidfile(self.dir / name)
        _stop_pidfile(self._munge_pidfile())
        if self.accounting:
            _mariadb(f"DROP DATABASE IF EXISTS {self.database}")


def _stop_pidfile(path: Path) -> None:
    """TERM to the daemon whose pid the file holds, and wait for it to go."""
    if not (path.exists() and path.read_text().strip().isdigit()):
        return
    pid = int(path.read_text().strip())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    SlurmCluster.wait(lambda: not _alive(pid), 15, f"exit of {path.name}")


def _mariadb(sql: str) -> None:
    host, port = MARIADB
    subprocess.run(["mariadb", "-uroot", f"-h{host}", f"-P{port}", "-e", sql], check=True, timeout=30)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False
