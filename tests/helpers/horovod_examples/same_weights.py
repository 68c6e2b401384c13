"""Compare the weights every rank of one example run saved (rank-R.npz, see sitecustomize.py):
prints one line; exits 0 when all ranks hold bit-identical weights, 1 when they differ, 2 when
a rank saved none.
    python same_weights.py DIR NP
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


class Missing(Exception):
    """A rank saved no weights to compare."""


def compare(folder: Path, n_ranks: int) -> str | None:
    """None when ranks 1.. equal rank 0 bit for bit, else what differs first."""
    files = [folder / f"rank-{r}.npz" for r in range(n_ranks)]
    missing = [f.name for f in files if not f.exists()]
    if missing:
        raise Missing(f"no weights from {', '.join(missing)}")
    ref = np.load(files[0])
    if not ref.files:
        raise Missing("rank 0 saved no Keras model")
    for f in files[1:]:
        other = np.load(f)
        if sorted(other.files) != sorted(ref.files):
            return f"{f.name} holds other models than rank-0.npz"
        for key in ref.files:
            if not np.array_equal(ref[key], other[key]):
                diff = np.max(np.abs(ref[key].astype(float) - other[key].astype(float)))
                return f"{key} differs between rank 0 and {f.stem} (max |diff| {diff:.3g})"
    return None


def main(folder: str, n_ranks: str) -> int:
    try:
        problem = compare(Path(folder), int(n_ranks))
    except Missing as e:
        print(f"weights: {e}")
        return 2
    n = len(np.load(Path(folder) / "rank-0.npz").files) if problem is None else 0
    print(f"weights: {problem}" if problem else f"weights: {n} arrays bit-identical on {n_ranks} ranks")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
