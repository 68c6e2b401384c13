"""--model's companions: --accumulate equals one step on the combined batch, --compression fp16
rounds as float16 does and halves the gradient bytes, exact resume and --init-weights of a Keras
model, and the digits example on a shrunken config under horovodrun."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import oracle
from conftest import (MODELS, PYTHON, ROOT, launch_cmd, read_metrics, relative_gap, run,
                      save_npz)



def job(ranks: int, *args: str, env: dict | None = None, launcher: str = "mpirun") -> str:
    """Run train.py on ranks ranks; its stdout."""
    res = run(launch_cmd("none" if ranks == 1 else launcher, ranks, *args), timeout=180,
              env=env)
    assert res.rc == 0, res.stderr
    return res.stdout


def keras_args(digits: Path, model: str, out: Path, *more: str) -> list[str]:
    """A float64 crossentropy run of examples/digits_model.py:model, metrics to out."""
    return ["--data", str(digits), "--model", f"{MODELS}:{model}", "--loss", "crossentropy",
            "--dtype", "float64", "--lr", "0.3", "--metrics", str(out), *more]


def losses(path: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(path)]


def test_accumulate_k_equals_one_step_on_the_combined_batch(digits, tmp_path) -> None:
    """K micro-batches per rank, one allreduce: the update of the whole batch, to rounding."""
    run_ = {}
    for name, ranks, more in [("full-1", 1, []), ("full-2x3", 2, ["--accumulate", "3"]),
                              ("mini-2", 2, ["--batch-size", "20"]),
                              ("mini-2x2", 2, ["--batch-size", "20", "--accumulate", "2"])]:
        out = tmp_path / f"{name}.jsonl"
        job(ranks, *keras_args(digits, "dense", out, "--steps", "12", "--log-every", "3"), *more)
        run_[name] = losses(out)
    assert relative_gap(run_["full-2x3"], run_["full-1"]) <= 1e-12
    assert relative_gap(run_["mini-2x2"], run_["mini-2"]) <= 1e-12
    assert run_["mini-2"] != run_["full-1"]  # the mini-batch runs take other steps


def test_fp16_compression_rounds_each_share_as_float16_does(tmp_path) -> None:
    """One SGD step of the seed job on 2 ranks with --compression fp16 (float64 otherwise):
    the applied gradient differs from the exact one by no more than float16's rounding of each
    rank's share and of their sum, and by more than float64's (so it was compressed)."""
    p = oracle.draw_params(5, 3)
    init = save_npz(tmp_path / "init.npz", p)
    dump = tmp_path / "dump"
    job(2, "--init-weights", str(init), "--dtype", "float64", "--steps", "1",
        "--compression", "fp16", "--dump-rank-state", str(dump))
    with np.load(dump / "rank-0.npz") as f:
        after = {k: f[k] for k in p}
    x, y = oracle.seed_data(50)
    shares = [{k: g * 25 / 50 for k, g in oracle.gradient(p, x[r:r + 25], y[r:r + 25]).items()}
              for r in (0, 25)]  # each rank's 25 rows, weighted by their count
    u, tiny = 2.0 ** -11, 2.0 ** -25  # float16's unit roundoff; half its smallest subnormal
    seen = []
    for k in p:
        exact = shares[0][k] + shares[1][k]
        applied = (p[k] - after[k]) / 0.01
        bound = 2.01 * u * (np.abs(shares[0][k]) + np.abs(shares[1][k])) + 3 * tiny
        assert np.all(np.abs(applied - exact) <= bound), k
        seen.append(np.max(np.abs(applied - exact)) / np.max(np.abs(exact)))
    print(f"fp16: largest gradient error {max(seen):.2e} relative (float16 u = {u:.2e})")
    assert max(seen) > 1e-6  # far above float64's rounding: the gradients went as float16


def allreduced_gradient_bytes(timeline: Path) -> tuple[int, int]:
    """(tensors, bytes) that entered Horovod's allreduce from DistributedGradientTape, as
    Horovod's own timeline records them (dtype and shape of every operation)."""
    text = timeline.read_text().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("name") == "process_name" and "name" in e.get("args", {})}
    count = size = 0
    for e in events:
        args = e.get("args", {})
        if e.get("ph") == "E" and "dtype" in args and "DistributedGradientTape" in names[e["pid"]]:
            shape = json.loads(args["shape"])
            count += 1
            size += int(np.prod(shape)) * np.dtype(args["dtype"]).itemsize
    return count, size


def test_fp16_compression_halves_the_gradient_bytes(digits, tmp_path) -> None:
    """Also: --model as package.module:FUNCTION, the module found on PYTHONPATH."""
    sent = {}
    for compression in ("none", "fp16"):
        timeline = tmp_path / f"{compression}.json"
        args = keras_args(digits, "dense", tmp_path / "m.jsonl", "--steps", "3")
        args[args.index("--model") + 1] = "digits_model:dense"
        job(2, *args, "--dtype", "float32", "--compression", compression,
            env={"HOROVOD_TIMELINE": str(timeline), "PYTHONPATH": str(MODELS.parent)})
        sent[compression] = allreduced_gradient_bytes(timeline)
    (n_none, b_none), (n_fp16, b_fp16) = sent["none"], sent["fp16"]
    print(f"gradient allreduce, 3 steps on 2 ranks: {b_none} bytes float32, {b_fp16} bytes "
          f"fp16 ({n_fp16} tensors each): ratio {b_fp16 / b_none:.3f}")
    assert n_none == n_fp16 == 3 * 4  # 4 arrays (2 kernels, 2 biases) a step
    assert b_fp16 * 2 == b_none


def test_keras_model_resumes_exactly_and_loads_its_weights(digits, tmp_path) -> None:
    """Adam on the CNN: 8 steps straight equal 4 steps, a checkpoint, and a resumed 4; the
    final weights.npz starts a new run from where the first ended."""
    common = ["--optimizer", "adam", "--lr", "0.01", "--log-every", "2"]
    straight, parts = tmp_path / "straight", tmp_path / "parts"
    job(2, *keras_args(digits, "cnn", straight / "m.jsonl", "--steps", "8", *common,
                       "--output-dir", str(straight)))
    job(2, *keras_args(digits, "cnn", parts / "m.jsonl", "--steps", "4", *common,
                       "--output-dir", str(parts), "--checkpoint-every", "4"))
    out = job(2, *keras_args(digits, "cnn", parts / "m.jsonl", "--steps", "8", *common,
                             "--output-dir", str(parts), "--resume"))
    assert "resuming from the checkpoint of step 4" in out
    assert losses(parts / "m.jsonl") == losses(straight / "m.jsonl")  # bit for bit
    with np.load(straight / "weights.npz") as a, np.load(parts / "weights.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    again = tmp_path / "again.jsonl"
    job(2, *keras_args(digits, "cnn", again, "--steps", "0", "--init-weights",
                       str(straight / "weights.npz")))
    assert losses(again) == losses(straight / "m.jsonl")[-1:]  # same ranks: the same sums


def test_digits_example_learns_on_a_shrunken_config(tmp_path) -> None:
    """The README's digits run, on 300 images and 3 epochs, under horovodrun -np 2."""
    data = tmp_path / "digits.npz"
    assert run([PYTHON, str(ROOT / "examples" / "digits_data.py"), str(data), "--rows",
                "300"]).rc == 0
    out = tmp_path / "run"
    job(2, "--data", str(data), "--model", f"{MODELS}:cnn", "--loss", "crossentropy",
        "--optimizer", "adam", "--lr", "0.01", "--batch-size", "64", "--epochs", "6",
        "--log-every", "5", "--output-dir", str(out), launcher="horovodrun-mpi")
    records = read_metrics(out / "metrics.jsonl")
    assert records[0]["accuracy"] < 0.3 and records[-1]["accuracy"] > 0.85, records[-1]
    assert (out / "weights.npz").exists() and (out / "fit.png").exists()  # the loss curve
    assert list((out / "tensorboard").iterdir())
