"""The alternative: tf.distribute.MultiWorkerMirroredStrategy (RING collectives), one worker per
process, TF_CONFIG set by bench/compare.py; the same step, gradients summed by all_reduce.
--xla compiles the loss and its gradient into one XLA cluster, as train.py's --xla does (the
all_reduce stays outside)."""
from __future__ import annotations

import json
import os

import tensorflow as tf

import common


def main() -> None:
    a = common.parse(__doc__, xla=True)
    task = json.loads(os.environ["TF_CONFIG"])
    rank, size = task["task"]["index"], len(task["cluster"]["worker"])
    tf.config.threading.set_intra_op_parallelism_threads(max(1, os.cpu_count() // size))
    tf.config.threading.set_inter_op_parallelism_threads(1)
    ring = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=ring)
    w = [tf.Variable(v) for v in common.init_weights(a.init_weights, a.dtype).values()]
    xn, yn = common.rows(a.n_points, *common.bounds(a.n_points, size, rank), a.dtype)
    x, y = tf.constant(xn), tf.constant(yn)

    def sq_sum() -> tf.Tensor:
        return tf.reduce_sum(tf.square(tf.tanh(x @ w[0] + w[1]) @ w[2] + w[3] - y))

    def local_grads() -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            share = sq_sum() / a.n_points  # this worker's share of the full-data MSE
        return tape.gradient(share, w)

    if a.xla:  # value and gradient in one XLA cluster, as train.py's --xla
        sq_sum = tf.function(sq_sum, jit_compile=True)
        local_grads = tf.function(local_grads, jit_compile=True)

    def replica_step() -> None:
        grads = tf.distribute.get_replica_context().all_reduce("sum", local_grads())
        for v, g in zip(w, grads):
            v.assign_sub(common.LR * g)

    step = tf.function(lambda: strategy.run(replica_step))
    total = tf.function(lambda: strategy.run(
        lambda: tf.distribute.get_replica_context().all_reduce("sum", sq_sum())))
    times, final = common.timed_loop(step, lambda: float(total()) / a.n_points, a.steps,
                                     a.log_every)
    common.write(a.out, rank, {"sec_per_step": times, "final_loss": final})


if __name__ == "__main__":
    main()
