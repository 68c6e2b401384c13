"""The seed job on one process: a 1 -> 5 tanh -> 1 network fits y = x^2 on 50 points of
[-2, 2] by full-batch gradient descent (lr 0.01, 2000 steps, mean squared error, float32).

    python examples/single_process.py

examples/synchronous.py is the same program split over P processes with Horovod:
`diff examples/single_process.py examples/synchronous.py` shows exactly what that takes.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter off

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N, HIDDEN, LR, STEPS, LOG_EVERY, SEED = 50, 5, 0.01, 2000, 50, 0


def the_data(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [start, stop) of x = linspace(-2, 2, N), y = x^2, as float32 columns."""
    x = np.linspace(-2.0, 2.0, N)[start:stop].reshape(-1, 1)
    return x.astype(np.float32), (x * x).astype(np.float32)


def initial_weights(seed: int) -> list[tf.Variable]:
    """W1 (1,5), b1 (1,5), W2 (5,1), b2 (1,1), each drawn from a standard normal."""
    rng = np.random.default_rng(seed)
    shapes = [(1, HIDDEN), (1, HIDDEN), (HIDDEN, 1), (1, 1)]
    return [tf.Variable(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def predict(weights: list[tf.Variable], x: tf.Tensor) -> tf.Tensor:
    """tanh(x W1 + b1) W2 + b2."""
    w1, b1, w2, b2 = weights
    return tf.tanh(x @ w1 + b1) @ w2 + b2


def main() -> None:
    x, y = the_data(0, N)
    weights = initial_weights(SEED)

    @tf.function
    def squared_errors() -> tf.Tensor:
        """The sum of squared errors over the rows."""
        return tf.reduce_sum(tf.square(predict(weights, x) - y))

    @tf.function
    def train_step() -> None:
        """One gradient-descent update on the mean squared error over all N points."""
        with tf.GradientTape() as tape:
            loss = squared_errors() / N
        grads = tape.gradient(loss, weights)
        for w, g in zip(weights, grads):
            w.assign_sub(LR * g)

    for step in range(STEPS + 1):
        if step % LOG_EVERY == 0:  # the loss after `step` updates
            loss = squared_errors() / N
            print(f"step {step} loss {float(loss):.6e}", flush=True)
        if step < STEPS:
            train_step()


if __name__ == "__main__":
    main()
