"""--lr-schedule, --warmup, --weight-decay, --clip-norm, --val-data and --early-stop on real
ranks: one process follows the NumPy oracle, P = 2 and 3 (uneven shards) equal one process to
1e-12 in float64, and a run killed mid-schedule resumes to the uninterrupted run bit for bit."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import oracle
from conftest import HELPERS, launch_cmd, read_metrics, relative_gap, run, save_npz

pytestmark = pytest.mark.xdist_group("options_exact")  # the one-process runs are shared
STEPS, EVERY, LR = 90, 10, 0.05
CASES = {  # name: (train.py flags, the oracle's keyword arguments)
    "adamw-cosine-warmup-clip-early": (
        ["--optimizer", "adam", "--lr-schedule", "cosine", "--warmup", "15", "--weight-decay",
         "0.02", "--clip-norm", "2", "--early-stop", "2"],
        {"optimizer": "adam", "weight_decay": 0.02, "clip_norm": 2.0, "patience": 2,
         "rate": ("cosine", 15, 0.1, 0)}),
    "momentum-l2-step-clip": (
        ["--optimizer", "momentum", "--lr", "0.01", "--lr-schedule", "step", "--lr-decay-rate",
         "0.5", "--lr-decay-every", "20", "--weight-decay", "0.001", "--clip-norm", "5"],
        {"optimizer": "momentum", "weight_decay": 0.001, "clip_norm": 5.0, "lr": 0.01,
         "rate": ("step", 0, 0.5, 20)}),
    "sgd-exponential-warmup": (
        ["--lr-schedule", "exponential", "--warmup", "5", "--lr-decay-rate", "0.3"],
        {"rate": ("exponential", 5, 0.3, 0)}),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """Training rows (50: 17/17/16 on 3 ranks), held-out rows past the training range, where
    the fit gets worse as it gets better inside, and the start weights."""
    folder = tmp_path_factory.mktemp("options")
    x = np.linspace(-2, 2, 50).reshape(-1, 1)
    v = np.linspace(1.5, 2.6, 11).reshape(-1, 1)
    np.savez(folder / "train.npz", x=x, y=x * x)
    np.savez(folder / "val.npz", x=v, y=v * v)
    params = oracle.draw_params(5, 7)
    save_npz(folder / "init.npz", params)
    return {"dir": folder, "x": x, "v": v, "params": params}


def job(files: dict, np_: int, name: str, out, *extra: str, env: dict | None = None):
    """CASES[name]'s run (name "": none of them) on np_ ranks with extra flags: its metrics
    records, or with env (a fault) the result itself."""
    flags = CASES[name][0] if name else []
    data = ["--data", str(files["dir"] / "train.npz"), "--val-data", str(files["dir"] / "val.npz")]
    res = run(launch_cmd("mpirun", np_, *data, "--init-weights", str(files["dir"] / "init.npz"),
                         "--dtype", "float64", "--lr", str(LR), "--steps", str(STEPS),
                         "--log-every", str(EVERY), *flags, "--output-dir", str(out), *extra),
              timeout=180, env=env)
    if env:
        return res
    assert res.rc == 0, res.stdout + res.stderr
    return read_metrics(out / "metrics.jsonl")


@pytest.fixture(scope="module")
def one(files, tmp_path_factory) -> dict:
    """Each case's one-process run: {name: (records, final weights)}."""
    done = {}
    for name in CASES:
        out = tmp_path_factory.mktemp(name) / "run"
        records = job(files, 1, name, out)
        with np.load(out / "weights.npz") as w:
            done[name] = (records, {k: w[k] for k in w})
    return done


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_process_follows_the_oracle(name: str, files, one) -> None:
    kwargs = dict(CASES[name][1])
    kind, warmup, decay, every = kwargs.pop("rate")
    rate = partial(oracle.scheduled_rate, kwargs.pop("lr", LR), kind, warmup, STEPS, decay, every)
    x, v = files["x"], files["v"]
    expected, weights = oracle.train_with_options(files["params"], x, x * x, STEPS, EVERY, rate,
                                                  val=(v, v * v), **kwargs)
    records, final = one[name]
    assert [r["step"] for r in records] == [r["step"] for r in expected]
    for key in ("loss", "val_loss"):
        gap = relative_gap([r[key] for r in records], [r[key] for r in expected])
        print(f"{name}: {key} of one process against the oracle: {gap:.1e}")
        assert gap < 1e-10, key
    assert max(np.abs(final[k] - weights[k]).max() for k in weights) < 1e-10
    if "patience" in kwargs:  # the held-out loss worsens: the run stops before STEPS
        assert records[-1]["step"] < STEPS


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_p_ranks_equal_one_process(name: str, np_: int, files, one, tmp_path) -> None:
    records = job(files, np_, name, tmp_path / "run")
    base = one[name][0]
    assert [r["step"] for r in records] == [r["step"] for r in base]  # early stops alike
    for key in ("loss", "val_loss", "lr"):
        if key in base[0]:
            gap = relative_gap([r[key] for r in records], [r[key] for r in base])
            print(f"{name} on {np_} ranks: {key} against one process: {gap:.1e}")
            assert gap < 1e-12, key


RESUMED = ["--optimizer", "adam", "--lr-schedule", "cosine", "--warmup", "25",
           "--weight-decay", "0.01", "--clip-norm", "3", "--checkpoint-every", "20"]


def test_a_run_killed_mid_schedule_resumes_bit_for_bit(files, tmp_path) -> None:
    """Warm-up, cosine, AdamW and clipping on 2 ranks; rank 0 dies at step 47, --resume goes
    on from the checkpoint of step 40 and ends with the uninterrupted run's losses, rates and
    weights, bit for bit (--early-stop keeps no checkpoints, so it is left out)."""
    whole = job(files, 2, "", tmp_path / "whole", *RESUMED)
    out = tmp_path / "cut"
    killed = {"PYTHONPATH": str(HELPERS / "faults"), "DPTRAIN_FAULT": "kill:0:47",
              "DPTRAIN_FAULT_STAMP": str(tmp_path / "fired")}
    res = job(files, 2, "", out, *RESUMED, env=killed)
    assert res.rc != 0 and (tmp_path / "fired").exists(), res.stderr
    assert sorted(p.name for p in (out / "checkpoints").iterdir())[-1] == "ckpt-000000040.npz"
    resumed = job(files, 2, "", out, *RESUMED, "--resume")
    assert [(r["step"], r["loss"], r["val_loss"], r["lr"]) for r in resumed] == [
        (r["step"], r["loss"], r["val_loss"], r["lr"]) for r in whole]
    with np.load(out / "weights.npz") as a, np.load(tmp_path / "whole" / "weights.npz") as b:
        assert all(a[k].tobytes() == b[k].tobytes() for k in b)
