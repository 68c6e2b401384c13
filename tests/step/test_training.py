"""Mini-batches, optimizers and the user's data files, on real mpirun processes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oracle
from conftest import ROOT, launch_cmd, read_metrics, relative_gap, run, save_npz
from dptrain.step.batches import Schedule
from dptrain.data.source import shard_bounds


RUNS = itertools.count()


def mpirun(np_: int, *flags: str, tmp, timeout: float = 180) -> list[dict]:
    """train.py on np_ ranks; its metrics records."""
    metrics = tmp / f"metrics-{next(RUNS)}.jsonl"
    cmd = launch_cmd("mpirun", np_, "--dtype", "float64", *flags, "--metrics", str(metrics))
    res = run(cmd, timeout=timeout)
    assert res.rc == 0, res.stdout + res.stderr
    return read_metrics(metrics)


def losses(records: list[dict]) -> list[float]:
    return [r["loss"] for r in records]


@pytest.mark.fast
@given(n=st.integers(1, 300), size=st.integers(1, 9), batch=st.integers(1, 310),
       shuffle=st.booleans())
def test_each_epoch_uses_every_sample_once_in_batches_of_b(n, size, batch, shuffle) -> None:
    rows = [shard_bounds(n, size, r) for r in range(size)]
    ranks = [Schedule(n, size, r, b - a, batch, 7, shuffle) for r, (a, b) in enumerate(rows)]
    per_epoch = ranks[0].steps_per_epoch
    for epoch in range(2):
        seen = []
        for k in range(epoch * per_epoch, (epoch + 1) * per_epoch):
            shares = [s.local_rows(k) for s in ranks]
            sizes = [len(s) for s in shares]
            assert sum(sizes) == min(batch, n - (k % per_epoch) * batch)
            assert max(sizes) - min(sizes) <= 1
            seen += [(r, int(i)) for r, share in enumerate(shares) for i in share]
        assert sorted(seen) == [(r, i) for r, (a, b) in enumerate(rows) for i in range(b - a)]


def interleaved(x: np.ndarray, size: int) -> np.ndarray:
    """The rows in the order a size-rank unshuffled run visits them (docs/data.md: global positions)."""
    starts = [shard_bounds(len(x), size, r)[0] for r in range(size)]
    return np.stack([x[starts[p % size] + p // size] for p in range(len(x))])


def test_one_and_two_ranks_agree_when_their_batches_are_the_same_samples(tmp_path) -> None:
    n = 41  # rank 0 holds 21 rows, rank 1 20; batches of 8, the epoch's last one 1 sample
    x = np.linspace(-2, 2, n).reshape(-1, 1)
    table = np.hstack([x, x ** 2])
    np.save(tmp_path / "two.npy", table)
    np.save(tmp_path / "one.npy", interleaved(table, 2))  # same batches as sets, one process
    init = save_npz(tmp_path / "init.npz", oracle.draw_params(5, 11))
    common = ["--batch-size", "8", "--no-shuffle", "--steps", "60", "--log-every", "5",
              "--optimizer", "momentum", "--init-weights", str(init)]
    two = mpirun(2, "--data", str(tmp_path / "two.npy"), *common, tmp=tmp_path)
    one = mpirun(1, "--data", str(tmp_path / "one.npy"), *common, tmp=tmp_path)
    assert relative_gap(losses(two), losses(one)) < 1e-9
    expected = oracle.train(oracle.draw_params(5, 11), interleaved(x, 2), interleaved(x, 2) ** 2,
                            0.01, 60, 5, "momentum", batch=8)
    assert relative_gap(losses(one), [v for _, v in expected]) < 1e-9


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_optimizers_match_the_oracle_and_stay_identical_on_every_rank(optimizer, tmp_path) -> None:
    p = oracle.draw_params(5, 21)
    init = save_npz(tmp_path / "init.npz", p)
    dump = tmp_path / "ranks"
    got = mpirun(3, "--optimizer", optimizer, "--steps", "200", "--init-weights", str(init),
                 "--dump-rank-state", str(dump), tmp=tmp_path)
    expected = oracle.train(p, *oracle.seed_data(50), 0.01, 200, 50, optimizer)
    assert relative_gap(losses(got), [v for _, v in expected]) < 1e-9
    states = []
    for r in range(3):
        with np.load(dump / f"rank-{r}.npz", allow_pickle=False) as f:
            states.append({k: f[k] for k in f.files})
    slots = [k for k in states[0] if k.startswith("slot.")]
    assert slots and all(np.any(states[0][k] != 0) for k in slots)  # the state is really used
    for other in states[1:]:
        assert other.keys() == states[0].keys()
        for k in states[0]:
            np.testing.assert_array_equal(other[k], states[0][k], err_msg=k)  # bit for bit


def test_shuffled_minibatches_are_reproducible_and_seeded(tmp_path) -> None:
    flags = ["--batch-size", "7", "--steps", "40", "--log-every", "10"]
    a = mpirun(2, *flags, "--seed", "3", tmp=tmp_path)
    b = mpirun(2, *flags, "--seed", "3", tmp=tmp_path)
    c = mpirun(2, *flags, "--seed", "4", tmp=tmp_path)
    assert losses(a) == losses(b)
    assert losses(a) != losses(c)
    assert losses(a)[-1] < losses(a)[0]


def write_formats(tmp, x: np.ndarray, y: np.ndarray) -> dict[str, list[str]]:
    """The same table as each supported file; the flags that train on it."""
    table = np.hstack([x, y])
    np.save(tmp / "d.npy", table)
    np.savez(tmp / "d.npz", x=x[:, 0], y=y[:, 0])
    lines = ["y,x"] + [f"{b!r},{a!r}" for a, b in zip(x[:, 0].tolist(), y[:, 0].tolist())]
    (tmp / "d.csv").write_text("\n".join(lines) + "\n")
    return {"npy": ["--data", str(tmp / "d.npy")], "npz": ["--data", str(tmp / "d.npz")],
            "csv": ["--data", str(tmp / "d.csv"), "--target", "y"]}


def test_every_file_format_trains_like_the_built_in_data(tmp_path) -> None:
    x, y = oracle.seed_data(50)
    init = save_npz(tmp_path / "init.npz", oracle.draw_params(5, 2))
    base = mpirun(2, "--steps", "100", "--init-weights", str(init), tmp=tmp_path)
    for name, flags in write_formats(tmp_path, x, y).items():
        got = mpirun(2, *flags, "--steps", "100", "--init-weights", str(init), tmp=tmp_path)
        assert relative_gap(losses(got), losses(base)) < 1e-12, name


def test_inputs_and_outputs_of_any_width(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (60, 3))
    y = np.stack([x[:, 0] * x[:, 1], np.sin(x[:, 2])], axis=1)
    np.savez(tmp_path / "wide.npz", x=x, y=y)
    out = tmp_path / "run"
    records = mpirun(2, "--data", str(tmp_path / "wide.npz"), "--hidden", "8,6", "--optimizer",
                     "adam", "--steps", "300", "--output-dir", str(out), tmp=tmp_path)
    assert records[-1]["loss"] < 0.5 * records[0]["loss"]
    with np.load(out / "weights.npz") as f:
        assert {k: f[k].shape for k in f.files} == {
            "W1": (3, 8), "b1": (1, 8), "W2": (8, 6), "b2": (1, 6), "W3": (6, 2), "b3": (1, 2)}


@pytest.mark.fast
def test_batch_composition_documented_in_the_data_page_matches() -> None:
    text = (ROOT / "docs" / "data.md").read_text()
    assert "position p belongs to rank p mod P" in text
    sched = [Schedule(10, 2, r, 5, 4, 0, False) for r in range(2)]
    # docs/data.md: batch 0 is global positions 0..3 = rank 0 local 0,1 and rank 1 local 0,1.
    assert [list(s.local_rows(0)) for s in sched] == [[0, 1], [0, 1]]
    assert [list(s.local_rows(2)) for s in sched] == [[4], [4]]
    assert list(itertools.chain(*[s.local_rows(1) for s in sched])) == [2, 3, 2, 3]
