"""fit.png: the loss curve beside the fitted function over the data.

    python -m dptrain.outputs.plot DIR      # redraw DIR/fit.png of a finished run
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dptrain.data.source import open_source, sample  # noqa: E402
from dptrain.errors import JobError, fail  # noqa: E402
from dptrain.nets.numpy_net import forward  # noqa: E402
from dptrain.outputs.report import atomic_write, save_weights, warn  # noqa: E402


def _ranks(records: list[dict]) -> str:
    n = records[-1]["ranks"] if records else 0
    return f"{n} rank{'s' * (n != 1)}"


def draw(run_dir: str) -> str:
    """Write run_dir/fit.png from config.json, metrics.jsonl and weights.npz; return its path."""
    try:
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        metrics = config.get("metrics") or os.path.join(run_dir, "metrics.jsonl")
        with open(metrics, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
        with np.load(os.path.join(run_dir, "weights.npz"), allow_pickle=False) as f:
            params = {k: f[k] for k in f.files}
    except (OSError, ValueError) as e:
        raise JobError(f"{run_dir}: not a finished run directory ({e})") from None
    source = open_source(config.get("data"), config.get("target"), config["n_points"],
                         np.float64)  # a figure needs no more than float64 of any run
    x, y = sample(source)
    # The fit panel draws the built-in regression network (W1, b1, ...) over one input.
    loss_name = {"mse": "MSE", "crossentropy": "cross-entropy"}[config.get("loss", "mse")]
    one_d = (x.ndim == 2 and x.shape[1] == 1 and y.shape[1] == 1 and loss_name == "MSE"
             and "W1" in params)
    fig, axes = plt.subplots(1, 2 if one_d else 1, figsize=(11 if one_d else 5.5, 4.2),
                             squeeze=False)
    ax = axes[0][0]
    ax.semilogy([r["step"] for r in records], [r["loss"] for r in records], color="C0")
    ax.set(xlabel="step", ylabel=f"full-data {loss_name} (log scale)",
           title=f"loss, {_ranks(records)}")
    ax.grid(True, which="both", alpha=0.3)
    if one_d:
        ax = axes[0][1]
        grid = np.linspace(x.min(), x.max(), 400).reshape(-1, 1)
        ax.scatter(x[:, 0], y[:, 0], s=10, color="C1", label="data")
        ax.plot(grid[:, 0], forward(params, grid)[:, 0], color="C0", label="network")
        ax.set(xlabel="x", ylabel="y", title=f"fit after {records[-1]['step']} steps")
        ax.legend()
    fig.tight_layout()
    path = os.path.join(run_dir, "fit.png")
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path


def save_results(run_dir: str, params: dict[str, np.ndarray]) -> None:
    """The end of a run (rank 0): run_dir/weights.npz, then fit.png, warning if it fails."""
    save_weights(os.path.join(run_dir, "weights.npz"), params)
    try:
        draw(run_dir)
    except JobError as e:  # the run itself succeeded: say why there is no figure
        warn(f"no fit.png: {e}")


def main(argv: list[str] | None = None) -> None:
    """Redraw the figure of a finished run."""
    p = argparse.ArgumentParser(prog="python -m dptrain.outputs.plot", description=__doc__)
    p.add_argument("run_dir", help="a train.py --output-dir")
    args = p.parse_args(argv)
    try:
        print(draw(args.run_dir))
    except JobError as e:
        fail(str(e))


if __name__ == "__main__":
    main(sys.argv[1:])
