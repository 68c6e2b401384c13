"""The synchronous loop: per-shard gradients, summed by ring-allreduce, one update everywhere."""
from __future__ import annotations

import time
from collections.abc import Callable

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from .batches import Schedule
from .distributed import global_sum
from .model import MLP
from .optim import Optimizer


class Trainer:
    """One rank's compiled step over its own rows, and the full-data loss."""

    def __init__(self, model: MLP, opt: Optimizer, x: np.ndarray, y: np.ndarray,
                 n_total: int, schedule: Schedule):
        self.model, self.opt, self.schedule = model, opt, schedule
        self.x, self.y, self.n_total = x, y, n_total
        self.tx, self.ty = tf.constant(x), tf.constant(y)  # the full-batch rows, made once
        # Rows are arguments of unknown count, never per-rank constants: every rank then
        # traces the same graph, so Horovod's allreduce names (taken from the gradient ops)
        # match across ranks. With per-rank shapes a 1-row shard got differently named
        # gradient ops than a 2-row shard, and the ranks waited for each other forever.
        xs = tf.TensorSpec([None, x.shape[1]], x.dtype)
        ys = tf.TensorSpec([None, y.shape[1]], x.dtype)
        scalar = tf.TensorSpec([], x.dtype)
        self._step = tf.function(self._update, input_signature=[xs, ys, scalar])
        self._sq_sum = tf.function(self._squared_error, input_signature=[xs, ys])
        # Trace both now, so the first logged step times measure steps, not compilation.
        self._step.get_concrete_function()
        self._sq_sum.get_concrete_function()

    def _squared_error(self, xs: tf.Tensor, ys: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.square(self.model(xs) - ys))

    def _update(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            # This shard's squared errors over the *global* batch's element count: the shares
            # sum to the batch MSE, and so do their gradients. That is weighting by sample
            # count, exact for uneven or empty shards, where op=Average (equal weight per
            # rank) would be wrong.
            share = self._squared_error(xs, ys) * scale
        # Horovod: combine the gradients across ranks by allreduce (sum of the shares).
        tape = hvd.DistributedGradientTape(tape, op=hvd.Sum)
        self.opt.apply(tape.gradient(share, self.model.weights))
        return share

    def step(self, k: int) -> None:
        """Update k+1: this rank's share of global batch k, combined across all ranks."""
        elements = self.schedule.global_batch_size(k) * self.y.shape[1]
        if self.schedule.full_batch:
            xs, ys = self.tx, self.ty
        else:
            rows = self.schedule.local_rows(k)
            xs, ys = self.x[rows], self.y[rows]
        self._step(xs, ys, tf.constant(1.0 / elements, self.tx.dtype))

    def full_loss(self) -> float:
        """Collective: the MSE of the current weights over all N samples of all ranks."""
        total = global_sum(self._sq_sum(self.tx, self.ty), "dptrain.loss")
        return float(total.numpy()) / (self.n_total * self.y.shape[1])


def run(trainer: Trainer, start: int, steps: int, log_every: int,
        log: Callable[[int, float, float | None, dict], None], tick: Callable[[], None],
        checkpoint: Callable[[int], None] | None, checkpoint_every: int) -> float:
    """Updates start+1..steps; log the full-data loss after every log_every-th and the last."""
    t0 = last_t = time.perf_counter()
    last_k = start
    for k in range(start, steps):
        if k % log_every == 0:  # the loss of the weights after k updates
            now = time.perf_counter()
            log(k, trainer.full_loss(), (now - last_t) / (k - last_k) if k > last_k else None,
                {"wall": now - t0})
            last_t, last_k = now, k
        trainer.step(k)
        tick()
        if checkpoint and checkpoint_every and (k + 1) % checkpoint_every == 0:
            checkpoint(k + 1)
    now = time.perf_counter()
    final = trainer.full_loss()
    log(steps, final, (now - last_t) / (steps - last_k) if steps > last_k else None,
        {"wall": now - t0})
    return final
