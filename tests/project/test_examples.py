"""The examples: single_process.py follows the NumPy oracle, synchronous.py on P ranks prints
the same losses, the diff between the two is only the Horovod lines, and asynchronous.py with
one worker is gradient descent again."""
from __future__ import annotations

import difflib
import re

import numpy as np
import pytest

import oracle
from conftest import PLATFORM, ROOT, launch_cmd, run

SINGLE = ROOT / "examples" / "single_process.py"
SYNC = ROOT / "examples" / "synchronous.py"
# float32 runs against a float64 oracle: 2000 float32 steps drift by a few 1e-6 relative
# (measured: 3.3e-6 single, 3.8e-6 on 2 ranks); 1e-4 leaves room for other CPUs and BLAS
# paths and still catches a wrong slice or op=Average (losses off by tens of percent).
FLOAT32_RTOL = 1e-4


STEP_LINE = re.compile(r"(?:^|:)step (\d+) loss (\S+)$")  # horovodrun prefixes `[0]<stdout>:`


def losses(stdout: str) -> list[tuple[int, float]]:
    """(step, loss) of every `step K loss L` line."""
    found = (STEP_LINE.search(line) for line in stdout.splitlines())
    return [(int(m[1]), float(m[2])) for m in found if m]


def seed_draw() -> dict:
    """The examples' initial weights: seed 0's standard normals for W1, b1, W2, b2 in that
    order, rounded to float32 (the seed program's draw)."""
    rng = np.random.default_rng(0)
    shapes = {"W1": (1, 5), "b1": (1, 5), "W2": (5, 1), "b2": (1, 1)}
    return {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
            for k, s in shapes.items()}


@pytest.fixture(scope="module")
def expected() -> list[tuple[int, float]]:
    return oracle.descend(seed_draw(), *oracle.seed_data(50), 0.01, 2000, 50)


def check_close(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """The same logged steps, and losses within float32's drift of the float64 reference."""
    assert [k for k, _ in got] == [k for k, _ in want]
    a, b = np.array([v for _, v in got]), np.array([v for _, v in want])
    gap = np.max(np.abs(a - b) / b)
    assert gap < FLOAT32_RTOL, f"largest relative difference {gap:.2e}"


def check(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """check_close, and it learned."""
    check_close(got, want)
    assert got[-1][1] < 0.01 * got[0][1]


@pytest.mark.fast
def test_single_process_follows_the_oracle(expected) -> None:
    res = run(launch_cmd("none", 1, script=SINGLE), timeout=120)
    assert res.rc == 0, res.stderr
    check(losses(res.stdout), expected)


@pytest.mark.parametrize("launcher,np_", [pytest.param("mpirun", 3, marks=PLATFORM),
                                           ("horovodrun-gloo", 2)])
def test_synchronous_prints_the_single_process_losses(launcher, np_, expected) -> None:
    res = run(launch_cmd(launcher, np_, script=SYNC), timeout=180)
    assert res.rc == 0, res.stderr
    got = losses(res.stdout)
    check(got, expected)
    assert len(got) == len(expected)  # rank 0 alone prints


@pytest.mark.fast
def test_the_diff_is_the_horovod_lines_and_each_file_is_short() -> None:
    single, sync = (p.read_text().splitlines() for p in (SINGLE, SYNC))
    assert len(single) <= 100 and len(sync) <= 100, (len(single), len(sync))
    docstring_end = sync.index('"""', 1)  # the module docstrings differ in their commands
    matcher = difflib.SequenceMatcher(a=single, b=sync, autojunk=False)
    hunks = [sync[j1:j2] for tag, _, _, j1, j2 in matcher.get_opcodes()
             if tag in ("insert", "replace") and j1 > docstring_end]
    assert hunks, "synchronous.py adds nothing"
    for hunk in hunks:  # every added or changed block names Horovod and why
        assert any("Horovod:" in line for line in hunk), "\n".join(hunk)
    assert sum(len(h) for h in hunks) < 40  # the distributed part is small


ASYNC = ROOT / "examples" / "asynchronous.py"


@PLATFORM  # mpi4py
def test_asynchronous_with_one_worker_is_gradient_descent(expected) -> None:
    """One worker: every push is the full-data gradient of the newest weights (no staleness)."""
    res = run(launch_cmd("mpirun", 2, script=ASYNC), timeout=180)
    assert res.rc == 0, res.stderr
    check(losses(res.stdout), expected)


def test_asynchronous_with_two_workers_is_the_replay_of_its_own_schedule(tmp_path) -> None:
    """Two workers: which pushes land on which weights depends on timing, so the reference is a
    float64 replay of the schedule the server saved: every update is lr x the pushing worker's
    slice gradient at the weights it fetched, and all 2000 land."""
    res = run(launch_cmd("mpirun", 3, str(tmp_path / "u.npz"), script=ASYNC), timeout=180)
    assert res.rc == 0, res.stderr
    with np.load(tmp_path / "u.npz") as u:
        worker, computed_on = u["worker"], u["computed_on"]
    staleness = np.arange(2000) - computed_on
    assert len(worker) == 2000 and set(worker) <= {1, 2} and staleness.min() >= 0
    x, y = oracle.seed_data(50)
    slices = np.array_split(np.arange(50), 2)
    history = oracle.replay(seed_draw(), x, y, slices, computed_on, worker, 0.01)
    want = [(k, oracle.loss(history[k], x, y)) for k in range(0, 2001, 50)]
    check_close(losses(res.stdout), want)
    counts = {k: int(np.sum(worker == k)) for k in sorted(set(worker.tolist()))}
    assert (f"updates per worker {counts}; staleness mean {staleness.mean():.2f}, "
            f"max {staleness.max()}") in res.stdout
