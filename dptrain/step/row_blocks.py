"""Sums over many rows, taken block by block in one compiled loop, so a step's intermediates
stay in the cache.

A full-batch step over millions of rows, compiled whole by XLA, writes the hidden activations
and the backward pass's (rows x width) intermediates to memory and reads them back: 13 loop
fusions and 5 reductions for the built-in network, each a trip through RAM. Taken 4096 rows at
a time in an XLA while loop, the same work runs on data that stays in the L2 cache, and XLA
allocates nothing of the rows' size. Measured on one core, 5e6 rows, the 1-5-1 network's loss
and gradient: float32 115 -> 37 ms, float64 236 -> 78 ms (bench/compare.py has the figures of
whole steps).

Only for functions of rows that are sums over independent rows (the built-in network: no
batch statistics, no randomness): a block's sum is then exactly its rows' share.
"""
from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

BLOCK = 4096  # rows per block; measured 1024: 48 ms, 2048: 49, 4096: 37, 8192: 40, 16384: 48

Parts = list[tf.Tensor]


def summed(fn: Callable[[tf.Tensor, tf.Tensor], Parts], xs: tf.Tensor, ys: tf.Tensor,
           block: int = BLOCK) -> Parts:
    """fn(xs, ys), for an fn whose every output is a sum over the rows, as the sum of fn over
    blocks of `block` rows (and the last, shorter block); the blocks' sums are added in float64."""
    n = tf.shape(xs)[0]
    full = n // block
    tail = fn(xs[full * block:], ys[full * block:])  # also gives the outputs' shapes

    def body(i: tf.Tensor, total: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # The size never over the row count (a loop that runs 0 times must still compile),
        # from the shape taken here, where XLA sees it as a constant.
        # The column counts as numbers: a -1 there made XLA's slice dynamic, at 2x the time.
        size = tf.minimum(block, tf.shape(xs)[0])
        rows = (tf.slice(xs, [i * size, 0], [size, xs.shape[1]]),
                tf.slice(ys, [i * size, 0], [size, ys.shape[1]]))
        return i + 1, total + _flat(fn(*rows))

    _, total = tf.while_loop(lambda i, _: i < full, body, (tf.constant(0), _flat(tail)))
    return _unflat(total, tail)


def _flat(parts: Parts) -> tf.Tensor:
    """The parts as one float64 vector (float64: the sum over thousands of blocks stays exact
    to the blocks' own rounding)."""
    return tf.concat([tf.reshape(tf.cast(p, tf.float64), [-1]) for p in parts], 0)


def _unflat(total: tf.Tensor, like: Parts) -> Parts:
    """total cut back into tensors of like's shapes and dtypes."""
    sizes = [p.shape.num_elements() for p in like]
    return [tf.cast(tf.reshape(t, p.shape), p.dtype)
            for t, p in zip(tf.split(total, sizes), like)]
