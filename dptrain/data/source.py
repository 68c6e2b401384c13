"""The training data, one interface for the built-in parabola and the user's --data file.

`open_source` is the one place that decides which of the two a run trains on. A source knows
its row count and widths without reading its rows, and reads any row range on request: each
rank builds or reads only its own contiguous block (`load_shard`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dptrain.data.files import DataFile
from dptrain.errors import JobError

X_LO, X_HI = -2.0, 2.0


class Source(Protocol):
    """Training rows, read by range: (x, y) arrays of the run's dtype, rows × inputs and
    rows × outputs."""

    rows: int
    inputs: int  # values per row of x: the product of input_shape
    input_shape: tuple[int, ...]  # one row of x, e.g. (8, 8, 1) for images
    outputs: int

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]: ...

    def every(self, stride: int) -> tuple[np.ndarray, np.ndarray]: ...

    def targets(self) -> np.ndarray: ...


class Parabola:
    """The seed data set: x = linspace(-2, 2, n), y = x^2, built row range by row range."""

    inputs = outputs = 1
    input_shape = (1,)

    def __init__(self, n: int, dtype: np.dtype):
        self.rows, self.dtype = n, dtype

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows [start, stop), computed element by element the way numpy.linspace does (in
        float64, then rounded to the run's dtype): the block is bit-identical to the same rows
        of the full array, which never exists."""
        n = self.rows
        i = np.arange(start, stop, dtype=np.float64)
        if n > 1:
            x = i * ((X_HI - X_LO) / (n - 1)) + X_LO
            if stop == n and stop > start:
                x[-1] = X_HI  # linspace pins the endpoint exactly
        else:
            x = np.full(stop - start, X_LO, dtype=np.float64)
        x = x.reshape(-1, 1)
        return x.astype(self.dtype), (x * x).astype(self.dtype)

    def every(self, stride: int) -> tuple[np.ndarray, np.ndarray]:
        x, y = self.read(0, self.rows)
        return x[::stride], y[::stride]

    def targets(self) -> np.ndarray:
        return self.read(0, self.rows)[1]


def open_source(data: str | None, target: str | None, n_points: int,
                dtype: np.dtype) -> Source:
    """The run's data in the run's dtype: the --data file if one is given, else the built-in
    parabola."""
    dtype = np.dtype(dtype)
    return Parabola(n_points, dtype) if data is None else DataFile(data, target, dtype)


def open_held_out(path: str, target: str | None, train: Source, classes: bool) -> Source:
    """--val-data in the training data's dtype, refused (JobError) unless its rows have the
    training rows' shape and, for classes, only classes the training data has."""
    held_out = DataFile(path, target, train.dtype, "--val-data")
    if (held_out.input_shape, held_out.outputs) != (train.input_shape, train.outputs):
        raise JobError(f"--val-data {path}: rows of shape {held_out.input_shape} with "
                       f"{held_out.outputs} target(s), the training rows have "
                       f"{train.input_shape} with {train.outputs}")
    if classes:  # each count reads every target of its file: once
        held, trained = class_count(held_out), class_count(train)
        if held > trained:
            raise JobError(f"--val-data {path}: has class {held - 1}, the training data's "
                           f"classes are 0..{trained - 1}")
    return held_out


def shard_bounds(n: int, size: int, rank: int) -> tuple[int, int]:
    """Half-open rows [start, stop) of rank's block; the first n % size blocks hold one more."""
    if n < 0 or size < 1 or not 0 <= rank < size:
        raise ValueError(f"bad shard request n={n} size={size} rank={rank}")
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


@dataclass(frozen=True)
class Shard:
    """This rank's rows and the size of the whole data set."""

    x: np.ndarray
    y: np.ndarray
    n_total: int


def load_shard(source: Source, size: int, rank: int) -> Shard:
    """This rank's contiguous block of the source's rows (only those are read)."""
    return Shard(*source.read(*shard_bounds(source.rows, size, rank)), source.rows)


def sample(source: Source, at_most: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Up to `at_most` evenly spaced rows, for figures."""
    return source.every(max(1, source.rows // at_most))


MAX_EXACT_CLASS = 2**24  # float32 holds every integer up to here, so labels survive the cast


def class_count(source: Source) -> int:
    """K for targets that are class indices 0..K-1 (K = the largest + 1), for --loss
    crossentropy; a JobError naming the first row whose target is not one."""
    t = np.asarray(source.targets(), np.float64)
    where = f"{source.flag} {source.path}" if isinstance(source, DataFile) else "the built-in data"
    if t.ndim != 2 or t.shape[1] != 1:
        raise JobError(f"{where}: --loss crossentropy needs one class index per row, the "
                       f"targets have shape {t.shape}")
    t = t[:, 0]
    bad = ~np.isfinite(t) | (t != np.round(t)) | (t < 0) | (t >= MAX_EXACT_CLASS)
    if bad.any():
        row = int(np.argmax(bad))
        raise JobError(f"{where}: row {row} has target {t[row]:g}; --loss crossentropy needs "
                       f"integer class indices 0, 1, ..., K-1")
    return int(t.max()) + 1
