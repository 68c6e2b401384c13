"""The learning rate by global step: a linear warm-up, then constant, cosine, step or
exponential decay.

rate(k) is the rate of update k + 1 (k updates done before it). It depends on k alone, never
on the rank count or on where a run was resumed: P ranks, one process and a resumed run use
the same rate at the same step. The warm-up starts near 0, not at lr/P as Horovod's
LearningRateWarmupCallback and Goyal et al. (2017) do: there --lr is one worker's rate and the
global batch grows with P, while here --lr is the global batch's rate and a full-batch run on P
ranks is the one-process run, so a P-dependent start would make P ranks train differently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import tensorflow as tf

KINDS = ("constant", "cosine", "step", "exponential")


@dataclass(frozen=True)
class LrSchedule:
    """lr, then warm-up and decay over a run of `total` updates."""

    lr: float = 0.01
    kind: str = "constant"
    warmup: int = 0  # updates 1..warmup rise linearly: lr * k / warmup for update k
    total: int = 0  # the run's last update (cosine reaches 0 there)
    rate: float = 0.1  # step: multiply by it every `every` updates; exponential: smoothly
    every: int = 0  # 0: a third of the updates after the warm-up

    def _period(self) -> int:
        return self.every or max(1, (self.total - self.warmup) // 3)

    def at(self, k: int) -> float:
        """The rate of update k + 1, in Python (for the log)."""
        if k < self.warmup:
            return self.lr * (k + 1) / self.warmup
        t, span = k - self.warmup, max(1, self.total - self.warmup)
        if self.kind == "cosine":
            return self.lr * 0.5 * (1.0 + math.cos(math.pi * min(t, span) / span))
        if self.kind == "step":
            return self.lr * self.rate ** (t // self._period())
        if self.kind == "exponential":
            return self.lr * self.rate ** (t / self._period())
        return self.lr

    def tensor(self, k: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """The rate of update k + 1 inside a compiled step (k: an int64 tensor), computed in
        float64 and rounded once to the run's dtype."""
        steps, k = k, tf.cast(k, tf.float64)
        lr, rate = tf.constant(self.lr, tf.float64), tf.constant(self.rate, tf.float64)
        warmup, span = float(self.warmup), float(max(1, self.total - self.warmup))
        t = k - warmup
        if self.kind == "cosine":
            after = lr * 0.5 * (1.0 + tf.cos(math.pi * tf.minimum(t, span) / span))
        elif self.kind == "step":  # whole periods counted in integers, as at() does
            periods = (steps - self.warmup) // self._period()
            after = lr * tf.pow(rate, tf.cast(tf.maximum(periods, 0), tf.float64))
        elif self.kind == "exponential":
            after = lr * tf.pow(rate, t / self._period())
        else:
            after = lr
        rising = lr * (k + 1.0) / warmup if self.warmup else lr
        return tf.cast(tf.where(k < warmup, rising, after), dtype)
