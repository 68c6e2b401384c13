"""The fault-injection hook (tests/helpers/faults) that the failure, resume, elastic and Slurm
tests rely on: it fires at the step asked for, its delay slows every update, and a hook whose
target was renamed away says so instead of letting a run go by unfaulted."""
from __future__ import annotations

import re
import shutil

import pytest

from conftest import HELPERS, PYTHON, TRAIN, run

pytestmark = pytest.mark.fast  # one plain process each, no launcher
FAULTS = HELPERS / "faults"
JOB = [PYTHON, str(TRAIN), "--steps", "20", "--log-every", "5"]


def test_a_raise_fires_at_its_step_and_ends_the_run(tmp_path) -> None:
    """raise:0:7 ends the run between the logs of steps 5 and 10, with the hook's error."""
    stamp = tmp_path / "fired"
    res = run(JOB, timeout=60, env={"PYTHONPATH": str(FAULTS), "DPTRAIN_FAULT": "raise:0:7",
                                    "DPTRAIN_FAULT_STAMP": str(stamp)})
    assert res.rc == 1 and stamp.exists(), res.stdout + res.stderr
    assert "injected fault at step 7" in res.stderr
    logged = [int(s) for s in re.findall(r"^step\s+(\d+)", res.stdout, re.M)]
    assert logged == [0, 5], res.stdout


def test_a_step_delay_slows_every_update(tmp_path) -> None:
    """DPTRAIN_STEP_DELAY=0.02 makes each logged interval's time per update at least 20 ms
    (a step alone takes well under 1 ms)."""
    res = run([*JOB, "--steps-per-call", "1"], timeout=60,
              env={"PYTHONPATH": str(FAULTS), "DPTRAIN_STEP_DELAY": "0.02"})
    assert res.rc == 0, res.stderr
    per_step = [float(ms) for ms in re.findall(r"([\d.]+) ms/step", res.stdout)]
    assert len(per_step) == 4 and min(per_step) >= 20, res.stdout


def test_a_stale_target_is_reported_not_skipped(tmp_path) -> None:
    """As if the loop's module were renamed: the run does not pass unfaulted, it exits 3."""
    stale = tmp_path / "faults"
    shutil.copytree(FAULTS, stale)
    hook = stale / "sitecustomize.py"
    text = hook.read_text()
    assert '("dptrain.step.loop", ' in text
    hook.write_text(text.replace('("dptrain.step.loop", ', '("dptrain.step.renamed", '))
    res = run(JOB, timeout=60, env={"PYTHONPATH": str(stale), "DPTRAIN_FAULT": "raise:0:7",
                                    "DPTRAIN_FAULT_STAMP": str(tmp_path / "fired")})
    assert res.rc == 3 and "the fault hook is stale" in res.stderr, res.stdout + res.stderr
