"""Peak RSS per rank when training on a 10^7-row .npy at P = 1 and P = 2.

Each rank memory-maps the file and copies only its own row range, so the data-dependent part
of its memory (rows, their tensors, the activations of a full-batch step) should shrink about
as 1/P. The TensorFlow + Horovod baseline is measured on the 50-point built-in data and
subtracted.

    .venv/bin/python bench/data_memory.py [--rows 10000000] [--out bench/results]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEAK = re.compile(r"peak_rss rank=(\d+) mb=([\d.]+)")


def peaks(np_: int, flags: list[str]) -> list[float]:
    """Peak RSS (MB) of each rank of one run, in rank order."""
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", sys.executable,
           os.path.join(ROOT, "bench", "peak_rss.py"), os.path.join(ROOT, "train.py"),
           *flags, "--steps", "2", "--log-every", "1"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if res.returncode != 0:
        sys.exit(f"run failed: {' '.join(cmd)}\n{res.stderr}")
    found = sorted((int(r), float(mb)) for r, mb in PEAK.findall(res.stderr))
    return [mb for _, mb in found]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="the run's --dtype (the file is written in it too)")
    p.add_argument("--xla", choices=("on", "off"), default="on",
                   help="the runs' --xla (on: what --xla auto picks for the large run)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.npy")
        x = np.linspace(-2, 2, args.rows)
        np.save(path, np.stack([x, x * x], axis=1).astype(args.dtype))
        del x
        size_mb = os.path.getsize(path) / 2**20
        rows = []
        for np_ in (1, 2):
            # --xla on in both: XLA's own fixed cost (its compiler, ~80-110 MB) is not the
            # data's, and the 50-point baseline would run without XLA by default.
            flags = ["--dtype", args.dtype, "--xla", args.xla]
            base = peaks(np_, flags)
            big = peaks(np_, [*flags, "--data", path])
            for rank, (b, m) in enumerate(zip(base, big)):
                rows.append({"P": np_, "rank": rank, "peak_rss_mb": m, "baseline_mb": b,
                             "data_part_mb": m - b})
    print(f"{args.rows:,} rows ({size_mb:.0f} MB .npy, {args.dtype}, --xla {args.xla}), "
          "full-batch step, peak RSS per rank:")
    print(f"{'P':>2} {'rank':>4} {'peak MB':>9} {'baseline MB':>12} {'data part MB':>13}")
    for r in rows:
        print(f"{r['P']:>2} {r['rank']:>4} {r['peak_rss_mb']:>9.0f} {r['baseline_mb']:>12.0f} "
              f"{r['data_part_mb']:>13.0f}")
    one = [r["data_part_mb"] for r in rows if r["P"] == 1][0]
    two = max(r["data_part_mb"] for r in rows if r["P"] == 2)
    print(f"data part, P=2 largest rank / P=1: {two / one:.3f} (ideal 0.5)")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"data_memory-{args.dtype}-xla-{args.xla}.json"), "w") as f:
        json.dump({"rows": args.rows, "dtype": args.dtype, "xla": args.xla, "file_mb": size_mb,
                   "runs": rows}, f, indent=2)


if __name__ == "__main__":
    main()
