"""What every bench competitor shares: the problem, the timed loop, and the result file."""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dptrain.data.source import Parabola  # noqa: E402 (the project's built-in data, tested)
from dptrain.data.source import shard_bounds as bounds  # noqa: E402,F401 (the project's slicing, tested)

LR = 0.01
NAMES = ("W1", "b1", "W2", "b2")  # the 1 -> 5 -> 1 network, as in --init-weights files


def parse(description: str, xla: bool = False) -> argparse.Namespace:
    """The flags every competitor takes from bench/compare.py (and --xla where it has one)."""
    p = argparse.ArgumentParser(description=description)
    if xla:
        p.add_argument("--xla", action="store_true", help="jit-compile the loss and gradient")
    p.add_argument("--n-points", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--log-every", type=int, required=True)
    p.add_argument("--init-weights", required=True)
    p.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    p.add_argument("--out", required=True, help="result prefix: PREFIX-rankR.json")
    return p.parse_args()


def init_weights(path: str, dtype: str) -> dict[str, np.ndarray]:
    """The shared initial weights, in the run's dtype."""
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k].astype(dtype) for k in NAMES}


def rows(n: int, lo: int, hi: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows [lo, hi) of x = linspace(-2, 2, n), y = x^2, as columns in dtype: train.py's
    built-in data, so every competitor trains on the same bits."""
    return Parabola(n, np.dtype(dtype)).read(lo, hi)


def timed_loop(step: Callable[[], None], loss: Callable[[], float], steps: int,
               log_every: int) -> tuple[list[float], float]:
    """Run `steps` updates one call each; seconds per step of every log interval (the loss
    evaluations left out, as train.py does) and the final full-data loss."""
    intervals = []
    for k in range(0, steps, log_every):
        loss()  # the logged loss, as in the seed job
        count = min(log_every, steps - k)
        t = time.perf_counter()
        for _ in range(count):
            step()
        intervals.append((time.perf_counter() - t) / count)
    return intervals, loss()


def write(prefix: str, rank: int, result: dict) -> None:
    """This rank's result plus its peak RSS."""
    result = result | {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    with open(f"{prefix}-rank{rank}.json", "w") as f:
        json.dump(result, f)


def rank_from_env() -> int:
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("HOROVOD_RANK", "0")))
