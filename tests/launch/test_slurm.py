"""train.sbatch on a real (one-node) Slurm cluster: COMPLETED with the NumPy oracle's losses."""
from __future__ import annotations

import re

import pytest

import oracle
from conftest import HELPERS, PLATFORM, ROOT, save_npz
from slurm_cluster import LocalSlurm

STEPS = 200
JOB = ("--steps", str(STEPS), "--dtype", "float64")  # float64: compared to rounding (1e-9)
LOSS_LINE = re.compile(r"step\s+(\d+)\s+loss\s+(\S+)")
pytestmark = pytest.mark.xdist_group("slurm")  # one cluster for the file


INIT = oracle.draw_params(5, 77)


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    return save_npz(tmp_path_factory.mktemp("w") / "init.npz", INIT)


@pytest.fixture(scope="module")
def reference() -> list[tuple[int, float]]:
    """The same job by the NumPy oracle: [(step, loss)] every 50 steps."""
    return oracle.descend(INIT, *oracle.seed_data(50), 0.01, STEPS, 50)


def submit(slurm: LocalSlurm, tmp_path, sbatch_args: list[str], job_args: list[str],
           env: dict | None = None, timeout: float = 180) -> tuple[str, str]:
    """sbatch train.sbatch from the repo root; wait; return (final state, log text)."""
    log = tmp_path / "job-%j.out"
    job = slurm.sbatch([*sbatch_args, f"--output={log}", str(ROOT / "train.sbatch"), *job_args],
                       cwd=ROOT, env=env)
    state = slurm.wait(job, timeout)
    return state, (tmp_path / f"job-{job}.out").read_text()


def logged_losses(log: str) -> list[tuple[int, float]]:
    return [(int(m.group(1)), float(m.group(2))) for m in LOSS_LINE.finditer(log)]


@pytest.mark.parametrize("sbatch_args", [pytest.param(["-n", "2"], marks=PLATFORM),
                                         ["-n", "4", "--ntasks-per-node=4"]],
                         ids=["n2", "n4-oversubscribed"])
@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_batch_job_completes_with_single_process_losses(slurm, tmp_path, init, reference,
                                                        sbatch_args, launcher) -> None:
    state, log = submit(slurm, tmp_path, sbatch_args, [*JOB, "--init-weights",
                        str(init)], env={"LAUNCHER": launcher})
    assert state == "COMPLETED", log
    ntasks = sbatch_args[1]
    assert f"{ntasks} tasks x 1 cpus" in log and "node(s) node0" in log  # provenance line
    assert f"ranks {ntasks}" in log
    got = logged_losses(log)
    assert [k for k, _ in got] == [k for k, _ in reference]
    for (_, a), (_, b) in zip(got, reference):
        assert a == pytest.approx(b, rel=1e-6)  # the log prints 7 significant digits


@PLATFORM
def test_batch_job_with_bad_flag_fails_with_one_line(slurm, tmp_path) -> None:
    """The log opens with the one line, and the job's exit code is 2 (docs/failures.md), not
    srun's 143 for the rank it kills: the script checks the flags before it starts any rank."""
    log_path = tmp_path / "job.out"
    job = slurm.sbatch(["-n", "2", f"--output={log_path}", str(ROOT / "train.sbatch"),
                        "--lr", "-1"], cwd=ROOT)
    state, log = slurm.wait(job, 60), log_path.read_text()
    assert state == "FAILED", log
    assert log.splitlines()[0] == "dptrain: error: --lr must be a positive number, got -1.0", log
    assert log.count("dptrain: error:") == 1, log
    assert slurm.job_field(job, "ExitCode") == "2:0", log



# Platform tier: srun's end of a job whose rank was killed, mpirun's of one whose rank raised.
@pytest.mark.parametrize("launcher,kind", [
    ("srun", "raise"), pytest.param("srun", "kill", marks=PLATFORM),
    pytest.param("mpirun", "raise", marks=PLATFORM), ("mpirun", "kill")])
def test_a_failing_rank_ends_the_batch_job_fast(slurm, tmp_path, launcher, kind) -> None:
    """Rank 1 raises or is SIGKILLed at step 300 of a long job: the job FAILS within 30 s."""
    import time
    stamp = tmp_path / "fired"
    state, log = submit(slurm, tmp_path, ["-n", "2"], ["--steps", "1000000"], env={
        "LAUNCHER": launcher, "PYTHONPATH": str(HELPERS / "faults"),
        "DPTRAIN_FAULT": f"{kind}:1:300", "DPTRAIN_FAULT_STAMP": str(stamp)}, timeout=120)
    after = time.time() - float(stamp.read_text())
    print(f"fault {kind} under sbatch/{launcher}: the job ended {after:.1f} s after it")
    assert state == "FAILED", log
    assert after < 30, f"the job took {after:.0f} s to end after the fault\n{log}"
    errors = [ln for ln in log.splitlines() if "dptrain: error:" in ln]
    if kind == "raise":
        assert len(errors) == 1 and "rank 1: RuntimeError: injected fault" in errors[0], log
    else:
        assert not errors and ("signal 9" in log or "Killed" in log), log
