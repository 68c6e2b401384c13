"""Real multi-process runs equal the single-process run, and both equal the NumPy oracle."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import oracle
from conftest import (HELPERS, PLATFORM, PYTHON, ROOT, launch_cmd, read_metrics, relative_gap,
                      run, save_npz)

SEED_STEPS, LR = 2000, 0.01
pytestmark = pytest.mark.xdist_group("distributed")  # one worker computes the references


def train(launcher: str, np_: int, tmp: Path, init: Path, *flags: str, dtype: str = "float64",
          timeout: float = 180) -> list:
    """Run train.py on np_ ranks under a launcher from given weights; its metrics records.
    float64 unless told: these tests prove agreement to rounding (1e-9 and better)."""
    metrics = tmp / "metrics.jsonl"
    res = run(launch_cmd(launcher, np_, "--init-weights", str(init), "--metrics", str(metrics),
                         "--dtype", dtype, *flags), timeout=timeout)
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


# Platform tier: 3 ranks (uneven shards, 17 + 17 + 16) over each MPI; 1, 2, 4 on the host.
@pytest.mark.parametrize("np_", [1, 2, pytest.param(3, marks=PLATFORM), 4])
def test_mpirun_equals_single_process(np_: int, single, seed_init, tmp_path) -> None:
    got = train("mpirun", np_, tmp_path, seed_init)
    assert [r["step"] for r in got] == list(range(0, SEED_STEPS + 1, 50))
    assert all(r["ranks"] == np_ for r in got)
    gap = relative_gap([r["loss"] for r in got], [r["loss"] for r in single])
    print(f"P={np_}: largest relative difference from P=1 over {len(got)} logged steps: {gap:.3e}")
    assert gap < 1e-12  # float64: a differently ordered sum, nothing more (measured 3.8e-15)


@PLATFORM
@pytest.mark.parametrize("flag", ["--gloo", "--mpi"])
def test_horovodrun_equals_single_process(flag: str, single, seed_init, tmp_path) -> None:
    got = train(f"horovodrun-{flag[2:]}", 2, tmp_path, seed_init)
    assert all(r["ranks"] == 2 for r in got)
    assert relative_gap([r["loss"] for r in got], [r["loss"] for r in single]) < 1e-12


@pytest.mark.parametrize("n,np_", [(7, 4), (3, 4), (1, 3), (11, 3)])
def test_uneven_and_empty_shards_are_exact(n: int, np_: int, tmp_path) -> None:
    p = oracle.draw_params(5, n)
    init = save_npz(tmp_path / "init.npz", p)
    got = train("mpirun", np_, tmp_path, init, "--n-points", str(n), "--steps", "300",
                "--log-every", "10")
    expected = oracle.descend(p, *oracle.seed_data(n), LR, 300, 10)
    assert relative_gap([r["loss"] for r in got], [v for _, v in expected]) < 1e-9


# Platform tier: XLA with Horovod's ops and an empty shard, as the build compiles them.
@pytest.mark.parametrize("n,np_", [pytest.param(3, 4, marks=PLATFORM), (50, 2)])
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
    from dptrain.ranks.runtime import use_xla
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert not use_xla("auto", 50 * 5 * 2)  # the seed job: 250 multiply-adds per rank
    assert not use_xla("auto", 2 * 10**6 - 2)
    assert use_xla("auto", 2 * 10**6)  # 10^6 per rank
    assert use_xla("on", 1) and not use_xla("off", 10**12)


SLACK_PROBE = """
import ctypes, os, threading, sys
from dptrain.ranks import runtime
runtime.fast_defaults(float(sys.argv[1]))
def read(): print(ctypes.CDLL(None).prctl(30, 0, 0, 0, 0))  # PR_GET_TIMERSLACK, this thread's
t = threading.Thread(target=read); t.start(); t.join()
print(os.environ.get("HOROVOD_CYCLE_TIME"))
"""


@pytest.mark.fast
@pytest.mark.skipif(not Path("/proc/self/timerslack_ns").exists(), reason="Linux >= 4.6 only")
def test_short_steps_get_a_short_cycle_and_a_tight_timer_slack() -> None:
    """The seed job's settings give a thread started afterwards (as Horovod's background
    thread is by hvd.init) a 1-us timer slack and Horovod a 0.01-ms cycle (0.05 under Gloo);
    a long step keeps the kernel's 50 us and Horovod's 1 ms."""
    gloo = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1"}
    for cost, env, want in ((250, {}, ["1000", "0.01"]), (250, gloo, ["1000", "0.05"]),
                            (10**9, {}, ["50000", "None"])):
        res = run([PYTHON, "-c", SLACK_PROBE, str(cost)], timeout=60,
                  env={"PYTHONPATH": str(ROOT)} | env)
        assert res.rc == 0, res.stderr
        assert res.stdout.split() == want, (cost, env, res.stdout)


# float32 (the default): P ranks and one process sum the same 50 squared errors and gradients
# in another order. One such sum differs by at most ~50 u relative (u = 2^-24 = 6e-8, so 3e-6)
# and typically by sqrt(50) u = 4e-7; gradient descent on this problem contracts, so the
# per-step differences do not compound beyond a few times one step's. Measured: see the
# printed figures (a few 1e-6 at most); 1e-4 leaves a factor of 20 and still fails for a
# wrong weighting or a lost shard, which move the losses by tens of percent.
FLOAT32_RTOL = 1e-4


@pytest.fixture(scope="module")
def seed_program(seed_init, tmp_path_factory) -> list:
    """The seed's TF1-style float32 program from the same weights: [(step, loss), ...]."""
    out = tmp_path_factory.mktemp("tf1") / "losses.json"
    res = run(launch_cmd("none", 1, str(seed_init), str(out),
                         script=HELPERS / "seed_tf1.py"), timeout=180)
    assert res.rc == 0, res.stderr
    return [tuple(r) for r in json.loads(out.read_text())]


@pytest.fixture(scope="module")
def single32(seed_init, tmp_path_factory) -> list:
    return train("none", 1, tmp_path_factory.mktemp("single32"), seed_init, dtype="float32")


@pytest.mark.parametrize("np_", [1, 3, 4])
def test_float32_follows_the_seed_program_and_one_process(np_, seed_program, single32,
                                                          seed_init, tmp_path) -> None:
    got = single32 if np_ == 1 else train("mpirun", np_, tmp_path, seed_init, dtype="float32")
    assert [r["step"] for r in got] == [k for k, _ in seed_program]
    losses = [r["loss"] for r in got]
    to_seed = relative_gap(losses, [v for _, v in seed_program])
    to_one = relative_gap(losses, [r["loss"] for r in single32])
    print(f"float32 P={np_}: largest relative difference over {len(got)} logged steps: "
          f"{to_seed:.2e} from the seed's TF1 program, {to_one:.2e} from P=1")
    assert to_seed < FLOAT32_RTOL and to_one < FLOAT32_RTOL
