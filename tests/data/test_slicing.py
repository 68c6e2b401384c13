"""Data slicing: every point on exactly one rank, in order, bit-identical to the full data."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, strategies as st

from dptrain.data.source import Parabola, load_shard, shard_bounds

pytestmark = pytest.mark.fast  # no launcher: in-process checks


@pytest.mark.parametrize("size", range(1, 9))
def test_blocks_cover_each_index_once_in_order(size: int) -> None:
    for n in range(0, 61):
        bounds = [shard_bounds(n, size, r) for r in range(size)]
        covered = [i for start, stop in bounds for i in range(start, stop)]
        assert covered == list(range(n)), (n, size, bounds)
        lengths = [stop - start for start, stop in bounds]
        assert max(lengths) - min(lengths) <= 1, (n, size, lengths)


@given(n=st.integers(1, 10**9), size=st.integers(1, 4096))
def test_blocks_partition_any_size(n: int, size: int) -> None:
    bounds = [shard_bounds(n, size, r) for r in range(size)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


@pytest.mark.parametrize("size", range(1, 9))
def test_shards_equal_rows_of_linspace(size: int) -> None:
    for n in range(1, 61):
        full = np.linspace(-2.0, 2.0, n)
        parts = [load_shard(Parabola(n, np.float64), size, r) for r in range(size)]
        x = np.concatenate([p.x[:, 0] for p in parts])
        y = np.concatenate([p.y[:, 0] for p in parts])
        np.testing.assert_array_equal(x, full)  # bit for bit, not approximately
        np.testing.assert_array_equal(y, full ** 2)


def test_a_rank_never_builds_the_whole_data_set() -> None:
    n, size = 10_000_000, 100
    tracemalloc.start()
    shard = load_shard(Parabola(n, np.float64), size, 57)
    x, y = shard.x, shard.y
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    shard_bytes = x.nbytes + y.nbytes
    assert len(x) == n // size
    assert peak < 4 * shard_bytes < n * 8, (peak, shard_bytes)  # a full x alone is 80 MB


def test_bad_request_is_refused() -> None:
    with pytest.raises(ValueError):
        shard_bounds(10, 2, 2)


@pytest.mark.parametrize("ext", [".npy", ".npz", ".csv"])
def test_every_file_format_reads_the_same_shards_as_the_built_in_data(ext, tmp_path) -> None:
    """One interface: a file holding the parabola gives each rank the rows Parabola gives it."""
    from dptrain.data.source import open_source
    n = 23
    x = np.linspace(-2.0, 2.0, n).reshape(-1, 1)
    path = tmp_path / f"p{ext}"
    if ext == ".npy":
        np.save(path, np.hstack([x, x * x]))
    elif ext == ".npz":
        np.savez(path, x=x, y=x * x)
    else:  # repr round-trips a float64 exactly
        path.write_text("x,y\n" + "".join(f"{float(a)!r},{float(a * a)!r}\n" for a in x[:, 0]))
    source = open_source(str(path), None, 0, np.float64)
    assert (source.rows, source.inputs, source.outputs) == (n, 1, 1)
    for size in (1, 3, 4):
        for rank in range(size):
            got, want = load_shard(source, size, rank), load_shard(Parabola(n, np.float64), size, rank)
            np.testing.assert_array_equal(got.x, want.x)
            np.testing.assert_array_equal(got.y, want.y)
            assert got.n_total == n
