"""The user-model competitors that are not this project: plain Keras `model.fit` in one process,
and `model.fit` under tf.distribute.MultiWorkerMirroredStrategy (RING collectives) when
TF_CONFIG names a cluster (bench/launchers.py starts one process per worker).

The same model (the --model function, built by dptrain's loader with the same seed, so the
same initial weights), the same data file, plain SGD, full-batch steps: each worker feeds its
contiguous shard, as train.py's ranks do, so the global batch is the whole data set in every
competitor. Writes PREFIX-rankR.json: seconds per step of each timed interval, the final
full-data loss, peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import common


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", required=True, help=".npz with x (images) and y (class indices)")
    p.add_argument("--model", required=True, help="FILE.py:FUNCTION, as train.py's --model")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--log-every", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="result prefix: PREFIX-rankR.json")
    return p.parse_args()


def _fit(model, x, y, a: argparse.Namespace) -> list[float]:
    """Plain model.fit, one full batch a step; seconds per step of each interval."""
    import keras
    import tensorflow as tf
    ends = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ends.append(time.perf_counter())

    start = time.perf_counter()
    model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(), epochs=a.steps // a.log_every,
              steps_per_epoch=a.log_every, verbose=0, callbacks=[Clock()])
    return list(np.diff([start, *ends]) / a.log_every)


def _mwms_loop(strategy, model, x, y, n: int, a: argparse.Namespace) -> list[float]:
    """MWMS's custom training loop (Keras 3's model.fit under MWMS fails here, converting its
    PerReplica batches): each worker's share of the full-batch loss, gradients summed by
    all_reduce, plain SGD."""
    import keras
    import tensorflow as tf
    x, y = tf.constant(x), tf.constant(y)
    weights = [v.value for v in model.trainable_variables]
    terms = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def replica_step() -> None:
        with tf.GradientTape() as tape:
            share = tf.reduce_sum(terms(y, model(x, training=True))) / n
        grads = tf.distribute.get_replica_context().all_reduce(
            "sum", tape.gradient(share, weights))
        for v, g in zip(weights, grads):
            v.assign_sub(a.lr * g)

    step = tf.function(lambda: strategy.run(replica_step))
    times = []
    for _ in range(a.steps // a.log_every):
        t = time.perf_counter()
        for _ in range(a.log_every):
            step()
        float(model.trainable_variables[0].value.numpy().ravel()[0])  # wait for the last step
        times.append((time.perf_counter() - t) / a.log_every)
    return times


def main() -> None:
    a = parse()
    cluster = json.loads(os.environ.get("TF_CONFIG", "null"))
    rank, size = (cluster["task"]["index"], len(cluster["cluster"]["worker"])) if cluster \
        else (0, 1)
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(max(1, os.cpu_count() // size))
    tf.config.threading.set_inter_op_parallelism_threads(1)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING)) \
        if cluster else tf.distribute.get_strategy()
    with np.load(a.data) as f:
        x_all, y_all = f["x"].astype(np.float32), f["y"].astype(np.int64).reshape(-1)
    lo, hi = common.bounds(len(x_all), size, rank)
    import keras
    from dptrain.nets.keras_model import build
    with strategy.scope():
        model = build(a.model, x_all.shape[1:], int(y_all.max()) + 1, "float32", a.seed).model
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
        # The mean over the global batch, as train.py's --loss crossentropy.
        model.compile(optimizer=keras.optimizers.SGD(a.lr),
                      loss=lambda y, p: loss(y, p) / len(x_all))
    if cluster:
        times = _mwms_loop(strategy, model, x_all[lo:hi], y_all[lo:hi], len(x_all), a)
    else:
        times = _fit(model, x_all, y_all, a)
    # The final full-data loss, the same sum over every row / N on every process.
    logits = model.predict(x_all, batch_size=len(x_all), verbose=0)
    final = float(loss(y_all, logits)) / len(x_all)
    common.write(a.out, rank, {"sec_per_step": times, "final_loss": final})


if __name__ == "__main__":
    main()
