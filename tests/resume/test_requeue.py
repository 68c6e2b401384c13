"""train.sbatch across allocations on a real one-node Slurm: a time limit's warning signal, a
`scontrol requeue` from outside, and the jobs that must not be requeued.

The jobs share one cluster and one wait. Slurm checks time limits every 30 s or so, so the
warning of `--time=2 --signal=B:USR1@90` comes 20-60 s into an allocation, before the 60 s of
training of a chain job are done: it needs two allocations. Once it has requeued itself, the
test raises its time limit to 10 minutes, so that the second allocation finishes it (a third
would only add time). Slurm holds a requeued job CRED_EXPIRE_S (30 s, slurm_cluster.py) before it
starts again.
"""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

import oracle
from conftest import HELPERS, PLATFORM, ROOT, launch_cmd, read_metrics, run, save_npz
from slurm_cluster import LocalSlurm

STEPS, LOG_EVERY, DELAY = 400, 10, 0.15  # DELAY s per update: 60 s of training in all
JOB = ["--steps", str(STEPS), "--log-every", str(LOG_EVERY), "--dtype", "float64"]
SHORT = ["--time=2", "--signal=B:USR1@90"]  # the warning 30-60 s in
WAIT_S = 600  # two allocations and a hold, with room
# Slurm's signals and requeue; the first test waits for every job, all on one worker.
pytestmark = [pytest.mark.timeout(WAIT_S + 200), PLATFORM, pytest.mark.xdist_group("requeue")]
SLURM_CPUS = 12  # six jobs of 1-2 tasks at once (the slurm fixture, conftest.py)
FAULTS = str(HELPERS / "faults")  # DPTRAIN_STEP_DELAY slows each update, same numbers


class Job:
    """One submitted train.sbatch: its id, log and output directory."""

    def __init__(self, slurm: LocalSlurm, d: Path, sbatch: list[str], args: list[str],
                 env: dict):
        self.slurm, self.out, self.log_path = slurm, d / "out", d / "job.log"
        self.id = slurm.sbatch([*sbatch, f"--output={self.log_path}", str(ROOT / "train.sbatch"),
                                *args], cwd=ROOT, env={"OUTPUT_DIR": str(self.out),
                                                       "PYTHONPATH": FAULTS} | env)
        self.state = ""

    @property
    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def finish(self) -> None:
        self.state = self.slurm.wait(self.id, WAIT_S)
        self.restarts = int(self.slurm.job_field(self.id, "Restarts") or -1)

    def errors(self, prefix: str) -> list[str]:
        return [ln for ln in self.log.splitlines() if f"{prefix}: error:" in ln]


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    return save_npz(tmp_path_factory.mktemp("w") / "init.npz", oracle.draw_params(5, 77))


@pytest.fixture(scope="module")
def jobs(slurm, init, tmp_path_factory) -> dict[str, Job]:
    """Every job of this file, submitted at once and waited for."""
    def submit(name: str, sbatch: list[str], args: list[str], **env: str) -> Job:
        return Job(slurm, tmp_path_factory.mktemp(name), sbatch, args, env)
    job = [*JOB, "--init-weights", str(init)]
    slow = {"DPTRAIN_STEP_DELAY": str(DELAY)}
    all_jobs = {
        "srun": submit("srun", ["-n", "2", *SHORT], job, LAUNCHER="srun", **slow),
        "mpirun": submit("mpirun", ["-n", "2", *SHORT], job, LAUNCHER="mpirun", **slow),
        "outside": submit("outside", ["-n", "2", "--time=10"], job, **slow),
        # The first logged step comes after 1000 updates, 150 s: past the time limit. The
        # longest job of the file, so it starts first.
        "short": submit("short", ["-n", "1", *SHORT],
                        [*job, "--steps", "2000", "--log-every", "1000"], **slow),
    }
    _requeue_from_outside(slurm, all_jobs["outside"])
    for name in ("srun", "mpirun"):
        _wait_for_log(all_jobs[name], "train.sbatch: requeueing|train.sbatch: error")
        _extend(slurm, all_jobs[name])
    # The rest start while the chains wait out their first hold (fewer ranks starting at once).
    all_jobs |= {
        "nan": submit("nan", ["-n", "2", "--time=10"], [*job, "--lr", "1e6"]),
        # A later warning (60-90 s in) and a longer run: under CI's load its batch script
        # took some 30 s to start srun, and the warning then reached a rank still loading
        # Python (docs/launching.md, "Time limits").
        "limit": submit("limit", ["-n", "1", "--time=3", "--signal=B:USR1@120"],
                        [*job, "--steps", "1000"], MAX_REQUEUES="0", **slow),
    }
    for j in all_jobs.values():
        j.finish()
    return all_jobs


def _wait_for_log(job: Job, pattern: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not re.search(pattern, job.log):
        assert time.monotonic() < deadline, f"job {job.id} never logged {pattern}\n{job.log}"
        time.sleep(0.5)


def _extend(slurm: LocalSlurm, job: Job, timeout: float = 60) -> None:
    """Raise the job's time limit to 10 minutes (refused while the requeue is under way)."""
    deadline = time.monotonic() + timeout
    while slurm.job_field(job.id, "TimeLimit") != "00:10:00":
        assert time.monotonic() < deadline, f"job {job.id}'s time limit could not be raised"
        slurm.scontrol("update", f"JobId={job.id}", "TimeLimit=10")
        time.sleep(0.5)


def _requeue_from_outside(slurm: LocalSlurm, job: Job) -> None:
    """Once the job has logged step 100, requeue it as an administrator or preemption would."""
    _wait_for_log(job, r"step\s+100\s+loss")
    res = subprocess.run(["scontrol", "requeue", str(job.id)], env=slurm.env, timeout=30,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def reference(init, tmp_path_factory) -> list[tuple[int, float]]:
    """The same job uninterrupted, on 2 ranks like the Slurm jobs (so the same sums)."""
    out = tmp_path_factory.mktemp("ref")
    res = run(launch_cmd("mpirun", 2, *JOB, "--init-weights", str(init), "--output-dir",
                         str(out)), timeout=180)
    assert res.rc == 0, res.stderr
    return [(r["step"], r["loss"]) for r in read_metrics(out / "metrics.jsonl")]


def _check_chain(job: Job, reference: list, signal: str) -> None:
    """COMPLETED after restarts; each stop resumed where it stopped; the uninterrupted losses."""
    log = job.log
    print(f"job {job.id}: {job.state}, restarts {job.restarts}\n" + "\n".join(
        ln for ln in log.splitlines() if re.search(r"allocation|stopped by|resuming|requeue", ln)))
    assert job.state == "COMPLETED" and job.restarts >= 1, log
    allocations = [int(n) for n in re.findall(r"\) allocation (\d+) partition", log)]
    assert allocations == list(range(1, job.restarts + 2)), log
    stops = [int(k) for k in re.findall(rf"stopped by {signal} after step (\d+) of", log)]
    resumes = [int(k) for k in re.findall(r"resuming from the checkpoint of step (\d+)", log)]
    assert stops and stops == resumes and stops == sorted(set(stops)), log
    assert not job.errors("dptrain") and not job.errors("train.sbatch"), log
    got = [(r["step"], r["loss"]) for r in read_metrics(job.out / "metrics.jsonl")]
    assert got == reference  # exactly: every step, every bit


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_a_time_limited_job_requeues_itself_to_the_uninterrupted_losses(jobs, reference,
                                                                        launcher) -> None:
    job = jobs[launcher]
    _check_chain(job, reference, "SIGUSR1")
    assert len(re.findall(r"train.sbatch: requeueing job", job.log)) == job.restarts
    # The launcher's lines about the ranks' exit 75 are followed by the script's word for them.
    planned = re.findall(r"train.sbatch: the ranks stopped at the checkpoint of step (\d+) as "
                         r"planned \(exit 75\)", job.log)
    assert planned == re.findall(r"stopped by SIGUSR1 after step (\d+) of", job.log), job.log


def test_a_job_requeued_from_outside_checkpoints_and_resumes(jobs, reference) -> None:
    job = jobs["outside"]
    _check_chain(job, reference, "SIGTERM")
    assert "train.sbatch: requeueing job" not in job.log  # Slurm requeued it, not the script


def test_a_failed_job_is_not_requeued(jobs) -> None:
    job = jobs["nan"]
    assert job.state == "FAILED" and job.restarts == 0, job.log
    errors = job.errors("dptrain")
    assert len(errors) == 1 and ("not finite" in errors[0] or "the loss is" in errors[0]), job.log
    assert "requeueing" not in job.log


def test_the_requeue_limit_stops_with_one_line(jobs) -> None:
    job = jobs["limit"]
    assert job.state == "FAILED" and job.restarts == 0, job.log
    errors = job.errors("train.sbatch")
    assert len(errors) == 1 and "MAX_REQUEUES=0" in errors[0], job.log
    assert f"--output-dir {job.out} --resume" in errors[0]
    # Its warning said as much when it came.
    assert "the last allocation MAX_REQUEUES allows: no requeue after it" in job.log, job.log
    assert list((job.out / "checkpoints").glob("ckpt-*.npz")), "the stop left no checkpoint"


def test_a_time_limit_too_short_for_a_checkpoint_says_what_to_change(jobs) -> None:
    job = jobs["short"]
    assert job.state == "TIMEOUT" and job.restarts == 0, job.log
    errors = job.errors("train.sbatch")
    assert len(errors) == 1 and "--signal=B:USR1@SECONDS" in errors[0], job.log
