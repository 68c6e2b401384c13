"""Checkpoints: a stopped run resumed equals the uninterrupted run; damaged checkpoints skipped."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import HELPERS, ROOT, TAG_VAR, job_env, kill_tagged, launch_cmd, read_metrics, run

pytestmark = pytest.mark.xdist_group("resume")  # the uninterrupted 600-step run is shared


def flags(steps: int = 600) -> list[str]:
    return ["--dtype", "float64", "--batch-size", "8", "--optimizer", "adam", "--lr", "0.02", "--steps", str(steps),
            "--checkpoint-every", "100", "--log-every", "25"]


def launch(np_: int, out, *extra: str, steps: int = 600, timeout: float = 180):
    res = run(launch_cmd("mpirun", np_, *flags(steps), "--output-dir", str(out), *extra),
              timeout=timeout)
    assert res.rc == 0, res.stdout + res.stderr
    return res


@pytest.fixture(scope="module")
def whole600(tmp_path_factory) -> Path:
    """The output directory of the uninterrupted 600-step run (2 ranks, 3 checkpoints kept);
    a test that damages it works on its own copy."""
    out = tmp_path_factory.mktemp("whole") / "run"
    launch(2, out)
    return out


def test_sigterm_then_resume_equals_the_uninterrupted_run(tmp_path) -> None:
    steps = 3000  # ample time after checkpoint 300 for SIGTERM to land mid-run
    launch(2, tmp_path / "whole", steps=steps)
    whole = read_metrics(tmp_path / "whole" / "metrics.jsonl")

    out = tmp_path / "cut"
    tag = "resume-" + os.urandom(6).hex()
    cmd = launch_cmd("mpirun", 2, *flags(steps), "--output-dir", str(out))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=job_env({TAG_VAR: tag}), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "checkpoints").glob("ckpt-000000300.npz")):
            assert time.monotonic() < deadline and proc.poll() is None, "no checkpoint 300"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)  # mid-run: somewhere after step 300
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_tagged(tag)
    assert proc.returncode != 0
    cut = read_metrics(out / "metrics.jsonl")
    assert cut[-1]["step"] < steps

    res = launch(2, out, "--resume", steps=steps)
    resumed_at = int(re.search(r"resuming from the checkpoint of step (\d+)", res.stdout)[1])
    resumed = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in resumed] == [r["step"] for r in whole]
    assert [r["loss"] for r in resumed] == [r["loss"] for r in whole]  # exactly
    # The two runs' records read as one: wall time goes on from the first run's (it does not
    # restart at 0), and the resume step's record keeps the step time of the run that trained
    # up to it (the resumed run timed none of those steps).
    walls = [r["wall"] for r in resumed]
    assert walls == sorted(walls), walls
    before = {r["step"]: r for r in cut}[resumed_at]
    again = {r["step"]: r for r in resumed}[resumed_at]
    assert again["sec_per_step"] == before["sec_per_step"] is not None
    assert again["wall"] >= before["wall"] > 0


def test_damaged_checkpoints_are_skipped_with_a_warning(whole600, tmp_path) -> None:
    out = tmp_path / "run"
    shutil.copytree(whole600, out)
    whole = read_metrics(out / "metrics.jsonl")
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == [
        "ckpt-000000400.npz", "ckpt-000000500.npz", "ckpt-000000600.npz"]  # keeps 3
    newest, middle = ckpts / "ckpt-000000600.npz", ckpts / "ckpt-000000500.npz"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated, as by a crash mid-copy
    with np.load(middle) as f:  # a well-formed file whose weights no longer match the checksum
        arrays = {k: f[k] for k in f.files}
    arrays["param.W1"] = arrays["param.W1"] + 1e-3
    np.savez(middle, **arrays)
    res = launch(2, out, "--resume")
    assert "skipping checkpoint" in res.stderr and "ckpt-000000600.npz is unreadable" in res.stderr
    assert "ckpt-000000500.npz fails its checksum" in res.stderr
    assert "resuming from the checkpoint of step 400" in res.stdout
    again = read_metrics(out / "metrics.jsonl")
    assert [r["loss"] for r in again] == [r["loss"] for r in whole]


def test_resuming_on_other_ranks_says_so_and_full_batch_is_unchanged(tmp_path) -> None:
    out = tmp_path / "fb"
    flags = ["--dtype", "float64", "--steps", "300", "--checkpoint-every", "100", "--log-every",
             "50"]
    res = run(launch_cmd("mpirun", 2, *flags, "--output-dir", str(out)), timeout=120)
    assert res.rc == 0, res.stderr
    whole = read_metrics(out / "metrics.jsonl")
    os.unlink(out / "checkpoints" / "ckpt-000000300.npz")
    res = run(launch_cmd("mpirun", 3, *flags, "--output-dir", str(out), "--resume"), timeout=120)
    assert res.rc == 0, res.stderr
    assert "resuming a 2-rank run on 3 ranks" in res.stderr
    again = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in again] == [r["step"] for r in whole]
    np.testing.assert_allclose([r["loss"] for r in again], [r["loss"] for r in whole], rtol=1e-12)
    assert json.loads((out / "config.json").read_text())["ranks"] == 3


def test_sigkill_at_a_random_step_loses_at_most_one_interval(whole600, tmp_path) -> None:
    """Rank 0 (the one that writes checkpoints) is SIGKILLed at a random step; --resume then
    starts from the newest checkpoint, at most one interval back, and ends exactly as the
    uninterrupted run."""
    import random

    steps, every = 600, 100
    at = random.randrange(101, steps)
    whole = read_metrics(whole600 / "metrics.jsonl")
    out = tmp_path / "killed"
    res = run(launch_cmd("mpirun", 2, *flags(steps), "--output-dir", str(out)), timeout=120,
              env={"PYTHONPATH": str(HELPERS / "faults"), "DPTRAIN_FAULT": f"kill:0:{at}",
                   "DPTRAIN_FAULT_STAMP": str(tmp_path / "fired")})
    assert res.rc != 0 and (tmp_path / "fired").exists(), f"killed at {at}: {res.stderr}"
    saved = max(int(p.stem.split("-")[1]) for p in (out / "checkpoints").glob("ckpt-*.npz"))
    assert at - every <= saved < at, f"killed before step {at}, newest checkpoint {saved}"

    res = launch(2, out, "--resume", steps=steps)
    assert f"resuming from the checkpoint of step {saved}" in res.stdout
    resumed = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in resumed] == [r["step"] for r in whole]
    assert [r["loss"] for r in resumed] == [r["loss"] for r in whole], f"killed at {at}"
