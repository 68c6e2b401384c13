"""What --accumulate K saves: peak RSS of one process training a wide network full-batch on
2·10^6 rows, K = 1, 2, 4, minus the same run on 50 rows (TensorFlow's own share).

The step's backward pass holds every layer's activations for its rows; with K micro-batches
it holds them for N/K rows at a time, so the data-dependent part should fall towards 1/K
(down to what the full-data loss evaluation and the rows themselves need).

    .venv/bin/python bench/accumulate_memory.py     # about a minute on 2 cores; writes
                                                    # bench/results/accumulate_memory.txt
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEAK = re.compile(r"peak_rss rank=0 mb=([\d.]+)")
FLAGS = ["--hidden", "64,64,64", "--steps", "2", "--log-every", "2", "--xla", "off"]


def peak(rows: int, accumulate: int) -> float:
    """Peak RSS (MB) of one run."""
    cmd = [sys.executable, os.path.join(ROOT, "bench", "peak_rss.py"),
           os.path.join(ROOT, "train.py"), "--n-points", str(rows), *FLAGS,
           "--accumulate", str(accumulate)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if res.returncode != 0:
        sys.exit(f"run failed: {' '.join(cmd)}\n{res.stderr}")
    return float(PEAK.search(res.stderr).group(1))


def main() -> None:
    """K = 1, 2, 4 on 2·10^6 rows; the data part of each, and its ratio to K = 1's."""
    base = peak(50, 1)
    parts = {k: peak(2_000_000, k) - base for k in (1, 2, 4)}
    lines = [f"train.py --n-points 2000000 {' '.join(FLAGS)}; TensorFlow alone: {base:.0f} MB"]
    lines += [f"--accumulate {k}: data part {mb:7.0f} MB  ({mb / parts[1]:.2f} of K = 1)"
              for k, mb in parts.items()]
    print("\n".join(lines))
    with open(os.path.join(ROOT, "bench", "results", "accumulate_memory.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
