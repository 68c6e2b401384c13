"""The losses a run minimises (--loss), as sums over rows, so that shards' sums add up exactly.

A loss here is a sum of per-element terms plus the element count it is averaged over: each
rank sums its own rows, the sums are added across ranks, and the mean is taken over the
global count. That is the sample-count weighting that makes uneven shards exact.
"""
from __future__ import annotations

import tensorflow as tf


class MeanSquaredError:
    """Mean over every element of (prediction - target)^2 (the seed job's loss)."""

    name = "mse"
    accuracy = False  # no classes

    @staticmethod
    def elements(rows: int, outputs: int) -> int:
        """How many terms the mean divides by."""
        return rows * outputs

    @staticmethod
    def sums(pred: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """[sum of squared errors]."""
        return tf.reshape(tf.reduce_sum(tf.square(pred - y)), [1])


class SoftmaxCrossEntropy:
    """Mean over rows of softmax cross-entropy from logits; y holds one class index per row."""

    name = "crossentropy"
    accuracy = True

    @staticmethod
    def elements(rows: int, outputs: int) -> int:
        """How many terms the mean divides by: one per row."""
        return rows

    @staticmethod
    def sums(pred: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """[sum of cross-entropies, count of rows whose largest logit is the target's]."""
        labels = tf.cast(y[:, 0], tf.int32)  # class indices, exact in the float data dtype
        terms = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=pred)
        hits = tf.equal(tf.argmax(pred, axis=1, output_type=tf.int32), labels)
        return tf.stack([tf.reduce_sum(terms), tf.reduce_sum(tf.cast(hits, pred.dtype))])


Loss = MeanSquaredError | SoftmaxCrossEntropy


def named(name: str) -> type[Loss]:
    """The loss of --loss NAME (cli.LOSSES lists the names)."""
    return {"mse": MeanSquaredError, "crossentropy": SoftmaxCrossEntropy}[name]
