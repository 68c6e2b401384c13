"""Fail fast: a rank that raises, runs out of memory, is SIGKILLed or meets a NaN ends the whole
job within 30 s under every launcher, with one line naming the rank, and leaves no process."""
from __future__ import annotations

import time

import pytest

from conftest import HELPERS, PLATFORM, killed_rank_report, launch_cmd, run

FAULTS = HELPERS / "faults"  # its sitecustomize.py injects DPTRAIN_FAULT
LONG = ["--steps", "1000000", "--log-every", "100"]  # minutes of work, were it not stopped
STEP = 300
DEADLINE_S = 30
LAUNCHERS = ("mpirun", "launch.sh", "horovodrun-mpi", "horovodrun-gloo")


def killed_report(launcher: str) -> str:
    """How the launcher reports rank 1's death by SIGKILL: horovodrun over Gloo, else mpirun."""
    if launcher == "horovodrun-gloo":
        return "Process 1 exit with status code"
    return killed_rank_report(1)


def inject(launcher: str, kind: str, tmp_path, timeout: float = 120):
    """Run a long job with fault KIND on rank 1 at STEP; (result, seconds from fault to end)."""
    stamp = tmp_path / "fired"
    res = run(launch_cmd(launcher, 3, *LONG), timeout=timeout, env={
        "PYTHONPATH": str(FAULTS), "DPTRAIN_FAULT": f"{kind}:1:{STEP}",
        "DPTRAIN_FAULT_STAMP": str(stamp)})
    assert stamp.exists(), f"the fault never fired\n{res.stdout}\n{res.stderr}"
    after = time.time() - float(stamp.read_text())
    print(f"fault {kind} under {launcher}: the job ended {after:.1f} s after it")  # pytest -s
    return res, after


def rank_tracebacks(launcher: str, res) -> list[str]:
    """Tracebacks printed by the ranks (horovodrun prints one of its own as it exits 1,
    whereas it tags every line of a rank's output with [rank])."""
    lines = (res.stdout + res.stderr).splitlines()
    tagged = launcher.startswith("horovodrun")
    return [ln for ln in lines if "Traceback" in ln and (not tagged or "]<std" in ln)]


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("kind,line", [  # platform tier: an exception under every launcher
    pytest.param("raise", f"dptrain: error: rank 1: RuntimeError: injected fault at step {STEP}",
                 marks=PLATFORM),
    ("oom", "dptrain: error: rank 1: MemoryError: Unable to allocate"),
])
def test_a_rank_that_raises_ends_the_job(launcher: str, kind: str, line: str, tmp_path) -> None:
    res, after = inject(launcher, kind, tmp_path)
    assert res.rc != 0
    assert after < DEADLINE_S, f"the job took {after:.0f} s to end after the fault"
    lines = res.error_lines()
    assert len(lines) == 1 and line in lines[0], (lines, res.stdout[-2000:], res.stderr[-3000:])
    assert not rank_tracebacks(launcher, res), res.stderr[-3000:]


@PLATFORM
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_killed_rank_ends_the_job(launcher: str, tmp_path) -> None:
    res, after = inject(launcher, "kill", tmp_path)
    assert res.rc != 0
    assert after < DEADLINE_S, f"the job took {after:.0f} s to end after the kill"
    assert killed_report(launcher) in res.stdout + res.stderr, res.stdout[-3000:] + res.stderr[-3000:]
    assert not res.error_lines(), "no survivor should blame itself for the dead rank"


@pytest.mark.parametrize("launcher", [pytest.param("mpirun", marks=PLATFORM), "horovodrun-gloo"])
def test_a_diverging_loss_stops_at_its_step_and_keeps_the_good_checkpoint(
        launcher: str, tmp_path) -> None:
    """lr 1000 overflows the loss to inf by step 40 in float64 (measured; float32 overflows at
    step 7, before any checkpoint); the run stops there."""
    out = tmp_path / "out"
    res = run(launch_cmd(launcher, 3, "--dtype", "float64", "--lr", "1000", "--log-every", "10",
                         "--checkpoint-every", "20", "--output-dir", str(out), "--steps",
                         "100000"))
    assert res.rc != 0
    lines = res.error_lines()
    assert len(lines) == 1, (lines, res.stderr[-2000:])
    assert "the loss is inf after step 40" in lines[0] or "not finite" in lines[0], lines
    kept = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert kept == ["ckpt-000000020.npz"], kept  # step 40's weights gave an inf loss
