"""The user's data: .npy (2-D, target in the last column), .npz (arrays x, y) or .csv (header).

Each rank learns the row count cheaply (the .npy header, a newline count for CSV) and then
reads only its own row range: memory-mapped for .npy, a skip-and-parse for CSV. An .npz is a
zip archive that cannot be memory-mapped, so each rank loads its arrays whole and keeps its
rows: use .npy for data sets that do not fit in memory once per rank.
"""
from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterator

import numpy as np

from dptrain.errors import JobError

EXTENSIONS = (".npy", ".npz", ".csv")


class DataFile:
    """A data file opened for row-range reads in a given dtype (a data.Source); every problem
    raises one JobError line."""

    def __init__(self, path: str, target: str | None, dtype: np.dtype, flag: str = "--data"):
        self.path, self.target, self.dtype, self.flag = path, target, dtype, flag
        self.ext = os.path.splitext(path)[1].lower()
        if self.ext not in EXTENSIONS:
            self._fail(f"unknown extension '{self.ext or '(none)'}' (use {', '.join(EXTENSIONS)})")
        if not os.path.isfile(path):
            self._fail("no such file")
        if os.path.getsize(path) == 0:
            self._fail("file is empty")
        with self._text_errors():
            self.rows, self.inputs, self.outputs = getattr(self, f"_open_{self.ext[1:]}")()
        self.input_shape: tuple[int, ...] = getattr(self, "input_shape", (self.inputs,))
        if self.rows == 0:
            self._fail("holds no data rows")

    def _fail(self, problem: str) -> None:
        raise JobError(f"{self.flag} {self.path}: {problem}")

    @contextlib.contextmanager
    def _text_errors(self) -> Iterator[None]:
        """A CSV that is not UTF-8 text, or that the csv module cannot split, is bad input."""
        try:
            yield
        except UnicodeDecodeError as e:
            self._fail(f"not UTF-8 text (byte {e.start} of a line: {e.reason})")
        except csv.Error as e:
            self._fail(f"not readable as CSV ({e})")

    def _open_npy(self) -> tuple[int, int, int]:
        try:
            self._array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except Exception as e:  # noqa: BLE001 (many error types for a damaged file)
            self._fail(f"not a readable .npy file ({type(e).__name__}: {e})")
        a = self._array
        if a.ndim != 2 or a.shape[1] < 2 or not np.issubdtype(a.dtype, np.number):
            self._fail(f"expected a numeric 2-D array (rows, inputs + 1 target), got "
                       f"{a.dtype} {a.shape}")
        return a.shape[0], a.shape[1] - 1, 1

    def _open_npz(self) -> tuple[int, int, int]:
        try:
            with np.load(self.path, allow_pickle=False) as f:
                if not {"x", "y"} <= set(f.files):
                    self._fail(f"needs arrays 'x' and 'y', has {sorted(f.files)}")
                x, y = f["x"], f["y"]
        except JobError:
            raise
        except Exception as e:  # noqa: BLE001
            self._fail(f"not a readable .npz file ({type(e).__name__}: {e})")
        x, y = (a.reshape(-1, 1) if a.ndim == 1 else a for a in (x, y))
        if x.ndim < 2 or not np.issubdtype(x.dtype, np.number):  # rows first: N×d or N×H×W×C
            self._fail(f"array 'x' must be numeric with rows first, got {x.dtype} {x.shape}")
        if y.ndim != 2 or not np.issubdtype(y.dtype, np.number):
            self._fail(f"array 'y' must be numeric with 1 or 2 dimensions, got "
                       f"{y.dtype} {y.shape}")
        if len(x) != len(y):
            self._fail(f"x has {len(x)} rows but y has {len(y)}")
        self._x, self._y = x, y
        self.input_shape = x.shape[1:]
        return len(x), int(np.prod(x.shape[1:])), y.shape[1]

    def _open_csv(self) -> tuple[int, int, int]:
        with open(self.path, newline="", encoding="utf-8") as f:
            header = next(csv.reader([f.readline()]), [])
        self.columns = [c.strip() for c in header]
        if len(self.columns) < 2:
            self._fail("needs a header row naming at least 2 columns (inputs and a target)")
        if self.target is None:
            self._target_col = len(self.columns) - 1
        elif self.target in self.columns:
            self._target_col = self.columns.index(self.target)
        else:
            self._fail(f"no column named '{self.target}' (columns: {', '.join(self.columns)})")
        return _count_lines(self.path) - 1, len(self.columns) - 1, 1

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows [start, stop) as (x, y) of the dtype, checked to be finite."""
        with self._text_errors():
            x, y = getattr(self, f"_read_{self.ext[1:]}")(start, stop)
        x, y = np.ascontiguousarray(x, self.dtype), np.ascontiguousarray(y, self.dtype)
        bad = ~(np.isfinite(x.reshape(len(x), -1)).all(axis=1) & np.isfinite(y).all(axis=1))
        if bad.any():
            self._fail(f"row {start + int(np.argmax(bad))} holds NaN or infinite values")
        return x, y

    def every(self, stride: int) -> tuple[np.ndarray, np.ndarray]:
        """Every stride-th row as (x, y), for figures; .npy and .npz without a full copy."""
        if self.ext == ".csv":  # no random access into text: read it all, keep every stride-th
            x, y = self.read(0, self.rows)
            return x[::stride], y[::stride]
        if self.ext == ".npz":
            return (np.asarray(self._x[::stride], self.dtype),
                    np.asarray(self._y[::stride], self.dtype))
        rows = np.asarray(self._array[::stride], self.dtype)
        return rows[:, :self.inputs], rows[:, self.inputs:]

    def targets(self) -> np.ndarray:
        """Every row's target as stored (not cast), rows × outputs: for checking class labels."""
        if self.ext == ".npz":
            return self._y
        if self.ext == ".npy":  # the last column of the mapped file: every page is read once
            return np.asarray(self._array[:, -1:])
        return self.read(0, self.rows)[1]

    def _read_npy(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self._array[start:stop]  # a view of the mapped file: only these pages are read
        return rows[:, :-1], rows[:, -1:]

    def _read_npz(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self._x[start:stop], self._y[start:stop]

    def _read_csv(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        cells = np.empty((stop - start, len(self.columns)), np.float64)  # read() casts
        with open(self.path, newline="", encoding="utf-8") as f:
            for _ in range(1 + start):  # the header, then the rows before this range
                f.readline()
            for i, row in enumerate(csv.reader(f)):
                if i == stop - start:
                    break
                self._parse_row(row, start + i, cells[i])
        target = cells[:, self._target_col:self._target_col + 1]
        return np.delete(cells, self._target_col, axis=1), target

    def _parse_row(self, row: list[str], index: int, out: np.ndarray) -> None:
        line = index + 2  # 1-based, after the header
        if len(row) != len(self.columns):
            self._fail(f"line {line} has {len(row)} cells, the header names {len(self.columns)}")
        for j, cell in enumerate(row):
            try:
                out[j] = float(cell)
            except ValueError:
                self._fail(f"line {line}, column '{self.columns[j]}': non-numeric cell {cell!r}")


def _count_lines(path: str) -> int:
    """Lines in a text file (a last line without a newline counts), in 1 MiB chunks."""
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")
