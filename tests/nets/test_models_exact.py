"""--model: a Keras model trained on P ranks (uneven shards) equals one process at every logged
step, and one process equals Keras' own compile/fit (tests/helpers/keras_reference.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import HELPERS, MODELS, PYTHON, launch_cmd, read_metrics, relative_gap, run

STEPS, LOG_EVERY = 30, 5
LR = {"dense": "0.3", "cnn": "0.05"}  # each descends steadily: no oscillation to amplify rounding
# float64 leaves only the order of the sums (~1e-15 a step); float32's rounding (6e-8 a term)
# over 30 steps of descent is the bound.
TOLERANCE = {"float64": 1e-9, "float32": 1e-5}
pytestmark = pytest.mark.xdist_group("models_exact")  # one-process runs are shared (below)


@pytest.fixture(scope="module")
def one_process(digits, tmp_path_factory):
    """one_process(model, dtype): the metrics of that one-process run, each run once."""
    runs: dict[tuple[str, str], list[dict]] = {}

    def get(model: str, dtype: str) -> list[dict]:
        if (model, dtype) not in runs:
            out = tmp_path_factory.mktemp(f"{model}-{dtype}") / "p1.jsonl"
            runs[model, dtype] = train(1, digits, model, dtype, out)
        return runs[model, dtype]
    return get


def train(ranks: int, digits: Path, model: str, dtype: str, out: Path) -> list[dict]:
    """The metrics of a full-batch SGD run of examples/digits_model.py:model on ranks ranks."""
    args = ["--data", str(digits), "--model", f"{MODELS}:{model}", "--loss", "crossentropy",
            "--dtype", dtype, "--steps", str(STEPS), "--log-every", str(LOG_EVERY), "--lr", LR[model],
            "--metrics", str(out)]
    res = run(launch_cmd("none" if ranks == 1 else "mpirun", ranks, *args), timeout=180)
    assert res.rc == 0, res.stderr
    return read_metrics(out)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("model", ["dense", "cnn"])
def test_p_ranks_equal_one_process_at_every_logged_step(model, dtype, digits, one_process,
                                                        tmp_path) -> None:
    runs = {p: train(p, digits, model, dtype, tmp_path / f"p{p}.jsonl") for p in (2, 3)}
    one = one_process(model, dtype)
    assert [r["step"] for r in one] == list(range(0, STEPS + 1, LOG_EVERY))
    assert one[-1]["loss"] < one[0]["loss"], "the model did not train"
    for p in (2, 3):
        gap = relative_gap([r["loss"] for r in runs[p]], [r["loss"] for r in one])
        print(f"{model} {dtype} P={p} vs 1: largest relative loss difference {gap:.2e}")
        assert gap <= TOLERANCE[dtype], (p, gap)
        if dtype == "float64":  # no sample can sit within 1e-15 of a tie
            assert [r["accuracy"] for r in runs[p]] == [r["accuracy"] for r in one]


@pytest.mark.parametrize("model", ["dense", "cnn"])
def test_one_process_equals_keras_own_fit(model, digits, one_process) -> None:
    got = one_process(model, "float64")
    res = run([PYTHON, str(HELPERS / "keras_reference.py"), str(digits),
               f"{MODELS}:{model}", "float64", str(STEPS), LR[model], "0"], timeout=120)
    assert res.rc == 0, res.stderr
    want = json.loads(res.stdout.splitlines()[-1])
    logged = [r["step"] for r in got]
    gap = relative_gap([r["loss"] for r in got], [want["loss"][k] for k in logged])
    print(f"{model} float64 vs Keras fit: {gap:.2e}")
    assert gap <= 1e-9
    assert [r["accuracy"] for r in got] == pytest.approx([want["accuracy"][k] for k in logged],
                                                         abs=1e-12)
