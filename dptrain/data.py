"""Data slicing: each rank builds only its contiguous block of the N training points."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

X_LO, X_HI = -2.0, 2.0
DTYPE = np.float64  # float64 so that P ranks and one process agree to rounding, not to 1e-7


def shard_bounds(n: int, size: int, rank: int) -> tuple[int, int]:
    """Half-open rows [start, stop) of rank's block; the first n % size blocks hold one more."""
    if n < 0 or size < 1 or not 0 <= rank < size:
        raise ValueError(f"bad shard request n={n} size={size} rank={rank}")
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def parabola_rows(n: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [start, stop) of x = linspace(-2, 2, n), y = x**2, as (rows, 1) columns.

    Computed element by element the way numpy.linspace does, so the block is bit-identical to
    the same rows of the full array without the full array ever existing.
    """
    i = np.arange(start, stop, dtype=DTYPE)
    if n > 1:
        x = i * ((X_HI - X_LO) / (n - 1)) + X_LO
        if stop == n and stop > start:
            x[-1] = X_HI  # linspace pins the endpoint exactly
    else:
        x = np.full(stop - start, X_LO, dtype=DTYPE)
    x = x.reshape(-1, 1)
    return x, x * x


def parabola_shard(n: int, size: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed data set's block for rank of size: x in [-2, 2], y = x^2."""
    return parabola_rows(n, *shard_bounds(n, size, rank))


@dataclass(frozen=True)
class Shard:
    """This rank's rows and the size of the whole data set."""

    x: np.ndarray
    y: np.ndarray
    n_total: int


def load_shard(data: str | None, target: str | None, n_points: int, size: int,
               rank: int) -> Shard:
    """This rank's block of the built-in parabola, or of the user's --data file."""
    if data is None:
        return Shard(*parabola_shard(n_points, size, rank), n_points)
    from .datafile import DataFile  # imports this module: load it only when needed
    f = DataFile(data, target)
    return Shard(*f.read(*shard_bounds(f.rows, size, rank)), f.rows)
