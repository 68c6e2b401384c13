"""Real multi-process runs equal the single-process run, and both equal the NumPy oracle."""
from __future__ import annotations

from pathlib import Path

import pytest

import oracle
from conftest import launch_cmd, read_metrics, relative_gap, run, save_npz

SEED_STEPS, LR = 2000, 0.01


def train(launcher: str, np_: int, tmp: Path, init: Path, *flags: str,
          timeout: float = 180) -> list:
    """Run train.py on np_ ranks under a launcher from given weights; its metrics records."""
    metrics = tmp / "metrics.jsonl"
    res = run(launch_cmd(launcher, np_, "--init-weights", str(init), "--metrics", str(metrics),
                         *flags), timeout=timeout)
    assert res.rc == 0, res.stdout + res.stderr
    return read_metrics(metrics)


@pytest.fixture(scope="module")
def seed_init(tmp_path_factory) -> Path:
    return save_npz(tmp_path_factory.mktemp("init") / "init.npz", oracle.draw_params(5, 2024))


@pytest.fixture(scope="module")
def single(seed_init, tmp_path_factory) -> list:
    """The seed configuration in one plain process (no launcher)."""
    return train("none", 1, tmp_path_factory.mktemp("single"), seed_init)


@pytest.mark.fast
def test_single_process_follows_the_oracle(single, seed_init) -> None:
    import numpy as np
    with np.load(seed_init) as f:
        p = {k: f[k] for k in f.files}
    expected = oracle.descend(p, *oracle.seed_data(50), LR, SEED_STEPS, 50)
    assert [r["step"] for r in single] == [k for k, _ in expected]
    assert relative_gap([r["loss"] for r in single], [v for _, v in expected]) < 1e-9
    assert single[-1]["loss"] < 0.5 * single[0]["loss"]  # and it actually trains


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_mpirun_equals_single_process(np_: int, single, seed_init, tmp_path) -> None:
    got = train("mpirun", np_, tmp_path, seed_init)
    assert [r["step"] for r in got] == list(range(0, SEED_STEPS + 1, 50))
    assert all(r["ranks"] == np_ for r in got)
    gap = relative_gap([r["loss"] for r in got], [r["loss"] for r in single])
    print(f"P={np_}: largest relative difference from P=1 over {len(got)} logged steps: {gap:.3e}")
    assert gap < 1e-4


@pytest.mark.parametrize("flag", ["--gloo", "--mpi"])
def test_horovodrun_equals_single_process(flag: str, single, seed_init, tmp_path) -> None:
    got = train(f"horovodrun-{flag[2:]}", 2, tmp_path, seed_init)
    assert all(r["ranks"] == 2 for r in got)
    assert relative_gap([r["loss"] for r in got], [r["loss"] for r in single]) < 1e-4


@pytest.mark.parametrize("n,np_", [(7, 4), (3, 4), (1, 3), (11, 3)])
def test_uneven_and_empty_shards_are_exact(n: int, np_: int, tmp_path) -> None:
    p = oracle.draw_params(5, n)
    init = save_npz(tmp_path / "init.npz", p)
    got = train("mpirun", np_, tmp_path, init, "--n-points", str(n), "--steps", "300",
                "--log-every", "10")
    expected = oracle.descend(p, *oracle.seed_data(n), LR, 300, 10)
    assert relative_gap([r["loss"] for r in got], [v for _, v in expected]) < 1e-9


@pytest.mark.parametrize("n,np_", [(3, 4), (50, 2)])
def test_xla_compiled_steps_are_exact(n: int, np_: int, tmp_path) -> None:
    """--xla on (what long steps get by default) keeps the oracle's trajectory, empty shard too."""
    p = oracle.draw_params(5, 100 + n)
    init = save_npz(tmp_path / "init.npz", p)
    got = train("mpirun", np_, tmp_path, init, "--n-points", str(n), "--steps", "300",
                "--log-every", "10", "--xla", "on")
    expected = oracle.descend(p, *oracle.seed_data(n), LR, 300, 10)
    assert relative_gap([r["loss"] for r in got], [v for _, v in expected]) < 1e-9


@pytest.mark.fast
def test_xla_auto_is_for_long_steps_only(monkeypatch) -> None:
    from dptrain.runtime import use_xla
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert not use_xla("auto", 50 * 5 * 2)  # the seed job: 250 multiply-adds per rank
    assert not use_xla("auto", 2 * 10**6 - 2)
    assert use_xla("auto", 2 * 10**6)  # 10^6 per rank
    assert use_xla("on", 1) and not use_xla("off", 10**12)
