"""The digits example at P = 1, 2, 4: accuracy reached and time taken (docs/models.md).

Writes scikit-learn's digits with examples/digits_data.py (1,438 to train on, the last 359
held out), then trains examples/digits_model.py:cnn with the README's flags: one plain
process, then horovodrun -np 2 and -np 4. Prints, and writes to bench/results/digits.md, per
P: the final loss and accuracy over the training images (the job's own log), the accuracy of
the final weights on the held-out images (Keras, here), the whole job's wall time (start-up
included), the training loop's own time, and the mean step.

    .venv/bin/python bench/digits.py          # about 2 minutes on 2 cores
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import launchers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["--model", os.path.join(ROOT, "examples", "digits_model.py") + ":cnn",
         "--loss", "crossentropy", "--optimizer", "adam", "--lr", "0.01",
         "--batch-size", "128", "--epochs", "20", "--log-every", "50"]


def held_out_accuracy(weights: str, test: str) -> float:
    """The accuracy of a run's weights.npz on the held-out images, through Keras alone."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from digits_model import cnn
    with np.load(test) as f:
        x, y = f["x"], f["y"]
    model = cnn(x.shape[1:], 10)
    with np.load(weights) as f:  # keyed NNN.path, NNN = the position in trainable_variables
        for v, name in zip(model.trainable_variables, sorted(f.files)):
            v.assign(f[name])
    return float(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == y))


def one(ranks: int, data: str, test: str, folder: str) -> dict:
    """Train on `ranks` ranks; the last metrics record, held-out accuracy, wall time."""
    out = os.path.join(folder, f"p{ranks}")
    metrics = os.path.join(out, "metrics.jsonl")
    argv = [os.path.join(ROOT, "train.py"), "--data", data, *FLAGS, "--output-dir", out]
    t0 = time.perf_counter()
    launchers.launch("python" if ranks == 1 else "horovodrun", ranks, argv, {}, 900)
    wall = time.perf_counter() - t0
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    steps = [r["sec_per_step"] for r in records if r["sec_per_step"] is not None]
    last = records[-1]
    return {"ranks": ranks, "steps": last["step"], "loss": last["loss"],
            "accuracy": last["accuracy"],
            "test_accuracy": held_out_accuracy(os.path.join(out, "weights.npz"), test),
            "job_s": wall, "train_s": last["wall"],
            "ms_per_step": 1e3 * sum(steps[1:]) / max(1, len(steps) - 1)}  # first: tracing


def main() -> None:
    """Run P = 1, 2, 4 and report."""
    with tempfile.TemporaryDirectory() as folder:
        data, test = os.path.join(folder, "digits.npz"), os.path.join(folder, "test.npz")
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "digits_data.py"), data,
                        "--test", test], check=True, stdout=subprocess.DEVNULL)
        rows = [one(p, data, test, folder) for p in (1, 2, 4)]
    lines = [f"digits CNN, {os.cpu_count()} cores: train.py --data digits.npz --model "
             f"examples/digits_model.py:cnn {' '.join(FLAGS[2:])}",
             "", "| ranks | steps | final loss | training accuracy | held-out accuracy | job (s) "
             "| training loop (s) | ms/step |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['ranks']} | {r['steps']} | {r['loss']:.4f} | {r['accuracy']:.4f} | "
              f"{r['test_accuracy']:.4f} | "
              f"{r['job_s']:.1f} | {r['train_s']:.1f} | {r['ms_per_step']:.2f} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "digits.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
