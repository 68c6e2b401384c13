"""A real one-node Slurm cluster for the tests: munged, slurmctld and slurmd on this machine.

Configuration, keys, state, sockets and logs live in one temporary directory; the daemons run
in the foreground as our children and are stopped by PID. Nothing under /etc is touched.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "srun")
CRED_EXPIRE_S = 30  # the requeue hold: a test waits this, not Slurm's default 120 s

CONF = """\
ClusterName=dptest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: how long Slurm holds a requeued job before it may start again (default 120 s);
# a step credential lives that long too, ample for steps that start within a second.
AuthInfo=socket={d}/munge.sock,cred_expire={cred_expire}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
# No cgroups in a container: track processes by parentage, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
# Look at pending jobs every 5 s, not 60: a requeued job starts soon after Slurm's hold ends.
SchedulerParameters=sched_interval=5
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=5
MinJobAge=600
# Job ids of their own: PMIx names its directories /tmp/spmix_appdir_UID_JOB.STEP, so two test
# clusters numbering from 1 would collide.
FirstJobId={first_job}
# The node claims {cpus} CPUs whatever the machine has, so `sbatch -n {cpus}` oversubscribes.
SlurmdParameters=config_overrides
NodeName=node0 NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=node0 Default=YES MaxTime=30 State=UP
"""


def missing_reason() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd runs jobs as their users)"
    absent = [d for d in TOOLS if shutil.which(d) is None]
    return f"not installed: {', '.join(absent)} (make setup installs them)" if absent else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalSlurm:
    """Start with start(), submit jobs with sbatch(), stop with stop() (always)."""

    def __init__(self, workdir: Path, env: dict, cpus: int = 4):
        self.d, self.cpus = workdir, cpus
        self.env = env | {"SLURM_CONF": str(workdir / "slurm.conf")}
        self.procs: list[subprocess.Popen] = []

    def start(self, timeout: float = 60) -> None:
        """Write the configuration, start the three daemons, wait for the node to be idle."""
        for sub in ("state", "spool"):
            (self.d / sub).mkdir(parents=True, exist_ok=True)
        key = self.d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (self.d / "slurm.conf").write_text(CONF.format(
            d=self.d, host=socket.gethostname(), ctld_port=_free_port(),
            slurmd_port=_free_port(), cpus=self.cpus,
            first_job=1000 + 3 * int.from_bytes(os.urandom(3), "big"),  # < MaxJobId
            cred_expire=CRED_EXPIRE_S))
        self._spawn("munged", ["munged", "-F", "-f", f"--socket={self.d}/munge.sock",
                               f"--key-file={key}", f"--log-file={self.d}/munged.log",
                               f"--pid-file={self.d}/munged.pid",
                               f"--seed-file={self.d}/munged.seed"])
        self._wait_for(lambda: (self.d / "munge.sock").exists(), timeout, "munged socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["slurmd", "-D", "-N", "node0"])
        self._wait_for(self._node_idle, timeout, "node0 idle")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.d / f"{name}.out", "wb")  # noqa: SIM115 (lives as long as the daemon)
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log,
                                           start_new_session=True))

    def _wait_for(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited; see {self.d}/*.out and *.log")
            time.sleep(0.3)
        raise TimeoutError(f"waited {timeout}s for {what}; see {self.d}")

    def _node_idle(self) -> bool:
        out = self.scontrol("show", "node", "node0")
        return "State=IDLE" in out

    def scontrol(self, *args: str) -> str:
        """scontrol's output ('' when it fails, e.g. before slurmctld listens)."""
        res = subprocess.run(["scontrol", *args], env=self.env, capture_output=True, text=True,
                             timeout=30)
        return res.stdout if res.returncode == 0 else ""

    def sbatch(self, args: list[str], cwd: Path, env: dict | None = None) -> int:
        """Submit; return the job id (raises with sbatch's message when it refuses)."""
        res = subprocess.run(["sbatch", "--parsable", *args], cwd=cwd, capture_output=True,
                             text=True, env=self.env | (env or {}), timeout=30)
        if res.returncode != 0:
            raise RuntimeError(f"sbatch refused: {res.stderr.strip()}")
        return int(res.stdout.strip().split(";")[0])

    def wait(self, job: int, timeout: float) -> str:
        """Poll until the job leaves PENDING/RUNNING/COMPLETING; return its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"JobState=(\w+)", self.scontrol("show", "job", "-o", str(job)))
            if m and m.group(1) not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING",
                                          "REQUEUED", "REQUEUE_FED"):
                return m.group(1)
            time.sleep(0.5)
        subprocess.run(["scancel", str(job)], env=self.env, timeout=30)
        raise TimeoutError(f"job {job} still not finished after {timeout}s")

    def job_field(self, job: int, field: str) -> str | None:
        """One field of `scontrol show job` (e.g. Restarts), or None."""
        m = re.search(rf"\b{field}=(\S+)", self.scontrol("show", "job", "-o", str(job)))
        return m.group(1) if m else None

    def stop(self) -> None:
        """Stop the daemons by PID, newest first: SIGTERM, then SIGKILL after 10 s."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
