"""--mode async: a parameter server and workers over mpi4py, on real mpirun processes."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

import oracle
import pytest

from conftest import (PLATFORM, ROOT, TAG_VAR, job_env, kill_tagged, killed_rank_report,
                      launch_cmd, read_metrics, relative_gap, run, save_npz, tagged_pids)


def async_run(np_: int, out: Path, *flags: str, timeout: float = 180):
    res = run(launch_cmd("mpirun", np_, "--mode", "async", "--dtype", "float64", "--output-dir",
                         str(out), *flags), timeout=timeout)
    assert res.rc == 0, res.stdout + res.stderr
    return res


@PLATFORM  # mpi4py's point-to-point messages
def test_one_worker_is_plain_gradient_descent(tmp_path) -> None:
    p = oracle.draw_params(5, 8)
    init = save_npz(tmp_path / "init.npz", p)
    async_run(2, tmp_path / "a", "--init-weights", str(init))
    got = read_metrics(tmp_path / "a" / "metrics.jsonl")
    expected = oracle.descend(p, *oracle.seed_data(50), 0.01, 2000, 50)
    assert [r["step"] for r in got] == [k for k, _ in expected]
    assert relative_gap([r["loss"] for r in got], [v for _, v in expected]) < 1e-4
    with np.load(tmp_path / "a" / "updates.npz") as u:
        assert np.all(u["applied_at"] == u["computed_on"])  # staleness 0, every update
    assert all(r["staleness_max"] == 0 for r in got)


def test_several_workers_apply_exactly_the_gradients_they_claim(tmp_path) -> None:
    """Replays the server's update log in NumPy: every update is lr x the pushed shard gradient
    at the version it names, so the weights and losses are the replay's, whatever the timing."""
    p0 = oracle.draw_params(5, 3)
    init = save_npz(tmp_path / "init.npz", p0)
    out = tmp_path / "b"
    res = async_run(4, out, "--steps", "1500", "--fetch-every", "2", "--push-every", "2",
                    "--init-weights", str(init))
    with np.load(out / "updates.npz") as u:
        applied, computed, worker = u["applied_at"], u["computed_on"], u["worker"]
    assert list(applied) == list(range(1500))  # exactly --steps updates, in version order
    staleness = applied - computed
    assert staleness.min() >= 0 and set(worker) <= {1, 2, 3}
    x, y = oracle.seed_data(50)
    slices = np.array_split(np.arange(50), 3)  # the first 50 % 3 workers hold one more row
    replayed = oracle.replay(p0, x, y, slices, computed, worker, lr=0.01, sums=2)
    with np.load(out / "weights.npz") as w:
        for name, value in replayed[-1].items():
            np.testing.assert_allclose(w[name], value, rtol=1e-9, atol=1e-12)
    records = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(0, 1501, 50))
    assert relative_gap([r["loss"] for r in records],
                        [oracle.loss(replayed[r["step"]], x, y) for r in records]) < 1e-9
    assert records[-1]["loss"] < records[0]["loss"]  # it learns (how much depends on timing)
    assert records[-1]["staleness_max"] == staleness.max()
    assert np.isclose(records[-1]["staleness_mean"], staleness.mean())
    assert f"staleness mean {staleness.mean():.2f}, max {staleness.max()}" in res.stdout


@PLATFORM  # how mpirun ends a job whose rank died
def test_a_killed_worker_ends_the_job_fast(tmp_path) -> None:
    tag = "async-" + os.urandom(6).hex()
    out = tmp_path / "c"
    cmd = launch_cmd("mpirun", 3, "--mode", "async", "--steps", "100000000", "--log-every",
                     "1000", "--output-dir", str(out))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=job_env({TAG_VAR: tag}), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "metrics.jsonl").exists() or len(
                (out / "metrics.jsonl").read_text().splitlines()) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, "job never got going"
            time.sleep(0.1)
        worker = [pid for pid in tagged_pids(tag) if rank_of(pid) == 2]
        assert len(worker) == 1
        os.kill(worker[0], signal.SIGKILL)
        t0 = time.monotonic()
        output, _ = proc.communicate(timeout=30)
        ended_after = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        leftovers = kill_tagged(tag)
    assert proc.returncode != 0
    assert ended_after < 30
    assert killed_rank_report(2) in " ".join(output.split()), output[-3000:]
    assert not leftovers


def rank_of(pid: int) -> int | None:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    for item in env:
        if item.startswith((b"OMPI_COMM_WORLD_RANK=", b"PMI_RANK=")):  # Open MPI, Hydra
            return int(item.split(b"=")[1])
    return None


@pytest.mark.fast
def test_async_refuses_one_rank_and_other_optimizers() -> None:
    res = run(launch_cmd("none", 1, "--mode", "async"), timeout=60)
    assert res.rc == 2 and "--mode async needs at least 2 ranks" in res.stderr
    res = run(launch_cmd("none", 1, "--mode", "async", "--optimizer", "adam"), timeout=60)
    assert res.rc == 2 and "no --optimizer other than sgd" in res.stderr
