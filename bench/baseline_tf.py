"""The baseline: the seed job as one TensorFlow process, no Horovod, one tf.function per step."""
from __future__ import annotations

import tensorflow as tf

import common


def main() -> None:
    a = common.parse(__doc__)
    w = [tf.Variable(v) for v in common.init_weights(a.init_weights, a.dtype).values()]
    xn, yn = common.rows(a.n_points, 0, a.n_points, a.dtype)
    x, y = tf.constant(xn), tf.constant(yn)

    def mse() -> tf.Tensor:
        return tf.reduce_mean(tf.square(tf.tanh(x @ w[0] + w[1]) @ w[2] + w[3] - y))

    @tf.function
    def step() -> None:
        with tf.GradientTape() as tape:
            loss = mse()
        for v, g in zip(w, tape.gradient(loss, w)):
            v.assign_sub(common.LR * g)

    loss = tf.function(mse)
    times, final = common.timed_loop(step, lambda: float(loss()), a.steps, a.log_every)
    common.write(a.out, 0, {"sec_per_step": times, "final_loss": final})


if __name__ == "__main__":
    main()
