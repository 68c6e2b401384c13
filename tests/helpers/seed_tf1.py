"""The seed's own program, TF1 style (graph, placeholders, Session, GradientDescentOptimizer,
float32), as an independent reference: python seed_tf1.py INIT.npz OUT.json writes
[[step, loss], ...] for steps 0, 50, ..., 2000 from the weights in INIT.npz.

Shares no code with dptrain; only the initial weights are given, so that runs can be compared.
"""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N, LR, STEPS, LOG_EVERY = 50, 0.01, 2000, 50


def main(init_path: str, out_path: str) -> None:
    tf.compat.v1.disable_eager_execution()
    with np.load(init_path) as f:
        init = {k: f[k].astype(np.float32) for k in f.files}
    x_data = np.linspace(-2.0, 2.0, N).reshape(-1, 1)
    y_data = x_data ** 2
    x = tf.compat.v1.placeholder(tf.float32, [None, 1])
    y = tf.compat.v1.placeholder(tf.float32, [None, 1])
    w1, b1, w2, b2 = (tf.compat.v1.Variable(init[k]) for k in ("W1", "b1", "W2", "b2"))
    hidden = tf.tanh(tf.matmul(x, w1) + b1)
    prediction = tf.matmul(hidden, w2) + b2
    loss = tf.reduce_mean(tf.square(prediction - y))
    train = tf.compat.v1.train.GradientDescentOptimizer(LR).minimize(loss)
    feed = {x: x_data, y: y_data}
    logged = []
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for step in range(STEPS + 1):
            if step % LOG_EVERY == 0:
                logged.append([step, float(sess.run(loss, feed))])
            if step < STEPS:
                sess.run(train, feed)
    with open(out_path, "w") as f:
        json.dump(logged, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
