"""The synchronous loop: per-shard gradients, summed by ring-allreduce, one update everywhere."""
from __future__ import annotations

import time
from typing import Callable

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from .distributed import global_sum
from .model import MLP

# Called on every logged step: (step, full-data loss, seconds per step since the last log).
LogFn = Callable[[int, float, float], None]
StepFn = Callable[[], tf.Tensor]


def make_step(model: MLP, x: np.ndarray, y: np.ndarray, n_total: int,
              lr: float) -> tuple[StepFn, StepFn]:
    """Compiled (step, evaluate): step returns this shard's loss share, then updates."""
    x, y = tf.constant(x), tf.constant(y)
    scale = tf.constant(1.0 / n_total, x.dtype)
    lr = tf.constant(lr, x.dtype)
    # The rows are arguments of unknown count, never constants: every rank then traces the
    # same graph, so Horovod's allreduce names (taken from the gradient ops) match across
    # ranks. With per-rank shapes, a 1-row shard gets differently named gradient ops than a
    # 2-row shard, and the ranks wait for each other's tensors forever.
    rows = tf.TensorSpec([None, 1], x.dtype)

    def share_of_loss(xs: tf.Tensor, ys: tf.Tensor) -> tf.Tensor:
        # This shard's squared errors over the *global* N: the shares sum to the full-data
        # MSE, and so do their gradients. That is weighting by sample count, exact for
        # uneven or empty shards, where op=Average (equal weight per rank) would be wrong.
        return tf.reduce_sum(tf.square(model(xs) - ys)) * scale

    @tf.function(input_signature=[rows, rows])
    def step(xs: tf.Tensor, ys: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            share = share_of_loss(xs, ys)
        # Horovod: combine the gradients across ranks by allreduce (sum of the shares).
        tape = hvd.DistributedGradientTape(tape, op=hvd.Sum)
        grads = tape.gradient(share, model.trainable_variables)
        for v, g in zip(model.trainable_variables, grads):
            v.assign_sub(lr * g)
        return share

    evaluate = tf.function(share_of_loss, input_signature=[rows, rows])
    return (lambda: step(x, y)), (lambda: evaluate(x, y))


def train(step: StepFn, evaluate: StepFn, steps: int, log_every: int, log: LogFn) -> float:
    """Run `steps` synchronous updates; log the full-data loss after 0, k, 2k, ... and `steps`."""
    last_t, last_k = time.perf_counter(), 0
    for k in range(steps):
        share = step()  # the loss share of the weights after k updates, then update k+1
        if k % log_every == 0:
            # Every rank joins this allreduce on the same steps, so it cannot deadlock.
            loss = float(global_sum(share, "dptrain.loss").numpy())
            now = time.perf_counter()
            log(k, loss, (now - last_t) / max(1, k - last_k))
            last_t, last_k = now, k
    elapsed = time.perf_counter() - last_t  # before evaluate(), whose first call compiles
    final = float(global_sum(evaluate(), "dptrain.loss").numpy())
    log(steps, final, elapsed / max(1, steps - last_k))
    return final
