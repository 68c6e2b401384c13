"""Synchronous (Horovod allreduce) against asynchronous (parameter server) on the same problem.

Both start from the same weights on the same data with the same P ranks (async: 1 server +
P-1 workers) and lr, and run the same number of applied updates. Prints a table and writes
bench/results/sync_vs_async.{json,md,png}: loss against wall time and against applied updates,
and async's staleness histogram.

    .venv/bin/python bench/sync_vs_async.py [--ranks 3] [--steps 2000] [--n-points 50]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def train(ranks: int, out: str, flags: list[str]) -> tuple[list[dict], dict | None]:
    """One run under mpirun; its metrics records and (async) summary."""
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", sys.executable,
           os.path.join(ROOT, "train.py"), "--output-dir", out, *flags]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}")
    with open(os.path.join(out, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    summary = os.path.join(out, "async.json")
    return records, json.load(open(summary)) if os.path.exists(summary) else None


def loss_at(records: list[dict], wall: float) -> float:
    """The last logged loss at or before a wall time."""
    return [r["loss"] for r in records if r["wall"] <= wall][-1]


def row(name: str, records: list[dict], summary: dict | None, equal_wall: float) -> dict:
    seconds = records[-1]["wall"]
    return {"mode": name, "final_loss": records[-1]["loss"],
            "loss_at_equal_wall": loss_at(records, equal_wall), "wall_s": seconds,
            "updates_per_s": records[-1]["step"] / seconds,
            "staleness_mean": summary["staleness_mean"] if summary else 0.0,
            "staleness_max": summary["staleness_max"] if summary else 0}


def figure(path: str, runs: dict, summary: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, records in runs.items():
        ax[0].semilogy([r["wall"] for r in records], [r["loss"] for r in records], label=name)
        ax[1].semilogy([r["step"] for r in records], [r["loss"] for r in records], label=name)
    ax[0].set(xlabel="wall time (s)", ylabel="full-data MSE", title="loss vs wall time")
    ax[1].set(xlabel="applied updates", ylabel="full-data MSE", title="loss vs updates")
    hist = {int(k): v for k, v in summary["staleness_histogram"].items()}
    ax[2].bar(list(hist), list(hist.values()), color="C1")
    ax[2].set(xlabel="staleness (updates)", ylabel="updates", yscale="log",
              title=f"async staleness (mean {summary['staleness_mean']:.2f})")
    for a in ax[:2]:
        a.legend()
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ranks", type=int, default=3)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--n-points", type=int, default=50)
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = p.parse_args()
    from dptrain.nets.builtin import random_params
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.npz")
        np.savez(init, **random_params((1, 5, 1), 0, np.float64))
        flags = ["--steps", str(args.steps), "--n-points", str(args.n_points), "--init-weights",
                 init, "--log-every", "10"]
        sync, _ = train(args.ranks, os.path.join(tmp, "sync"), flags)
        asyn, summary = train(args.ranks, os.path.join(tmp, "async"), flags + ["--mode", "async"])
    equal = min(sync[-1]["wall"], asyn[-1]["wall"])
    rows = [row("sync", sync, None, equal), row("async", asyn, summary, equal)]
    header = ("| mode | final loss | loss at equal wall time ({:.2f} s) | wall (s) | updates/s "
              "| staleness mean | staleness max |").format(equal)
    lines = [header, "| --- | --- | --- | --- | --- | --- | --- |"] + [
        f"| {r['mode']} | {r['final_loss']:.4e} | {r['loss_at_equal_wall']:.4e} | "
        f"{r['wall_s']:.2f} | {r['updates_per_s']:.0f} | {r['staleness_mean']:.2f} | "
        f"{r['staleness_max']} |" for r in rows]
    print(f"P = {args.ranks} ranks (async: 1 server + {args.ranks - 1} workers), "
          f"{args.steps} updates, N = {args.n_points}, lr 0.01, same initial weights")
    print("\n".join(lines))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sync_vs_async.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "sync_vs_async.json"), "w") as f:
        json.dump({"args": vars(args), "rows": rows, "async_summary": summary}, f, indent=2)
    figure(os.path.join(args.out, "sync_vs_async.png"), {"sync": sync, "async": asyn}, summary)
    print(f"wrote {args.out}/sync_vs_async.{{md,json,png}}")


if __name__ == "__main__":
    main()
