"""One rank of the Keras 3 checks of the patched Horovod (run under mpirun by test_keras3.py).

Every check compares Horovod's result with a reference each rank computes alone, in float64,
from the data and initial weights of all ranks (they are all derived from the rank number):
no Horovod collective takes part in a reference. Rank 0 writes {check: largest error} as JSON.
"""
from __future__ import annotations

import json
import os
import sys

# Keras 3 through tf.keras even in a KERAS=2 venv (whose .pth sets tf.keras to tf_keras).
os.environ["TF_USE_LEGACY_KERAS"] = "0"

import keras  # noqa: E402
import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
import horovod.tensorflow.keras as hvd_keras

keras.backend.set_floatx("float64")
LR = 0.1


def make_model(seed: int) -> keras.Sequential:
    """A small dense net whose initial weights depend on seed (so on the rank)."""
    init = keras.initializers.RandomNormal(seed=seed)
    return keras.Sequential([keras.Input((3,)),
                             keras.layers.Dense(4, activation="tanh", kernel_initializer=init,
                                                bias_initializer=init),
                             keras.layers.Dense(1, kernel_initializer=init)])


def data(rank: int, n: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Rank `rank`'s own samples."""
    rng = np.random.default_rng(100 + rank)
    return rng.normal(size=(n, 3)), rng.normal(size=(n, 1))


def local_grads(model: keras.Model, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Plain TensorFlow gradient of the mean squared error on (x, y)."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def averaged_reference(weights: list[np.ndarray]) -> list[np.ndarray]:
    """The mean over ranks of each rank's own gradient, all at `weights`, computed here alone."""
    model = make_model(0)
    model.set_weights(weights)
    per_rank = [local_grads(model, *data(r)) for r in range(hvd.size())]
    return [np.mean(gs, axis=0) for gs in zip(*per_rank)]


def max_err(got: list, want: list) -> float:
    """Largest absolute difference over a list of arrays."""
    return max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(got, want))


def check_tape(compiled: bool) -> float:
    """DistributedGradientTape over Keras 3 variables, then a Keras optimizer applies it."""
    model = make_model(0)
    w0 = [w.copy() for w in model.get_weights()]
    opt = keras.optimizers.SGD(LR)
    x, y = data(hvd.rank())

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return grads

    grads = tf.function(step)() if compiled else step()
    want = averaged_reference(w0)
    new_w = [w - LR * g for w, g in zip(w0, want)]
    return max(max_err([g.numpy() for g in grads], want), max_err(model.get_weights(), new_w))


def check_broadcast(compiled: bool) -> float:
    """broadcast_variables on a Keras model's variables: every rank ends with rank 0's."""
    model = make_model(hvd.rank())

    def fn() -> None:
        hvd.broadcast_variables(model.variables, root_rank=0)

    tf.function(fn)() if compiled else fn()
    return max_err(model.get_weights(), make_model(0).get_weights())


def check_partial_tape() -> float:
    """PartialDistributedGradientTape: the local layer's gradient stays local (÷ size)."""
    model = make_model(0)
    x, y = data(hvd.rank())
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[model.layers[1]])
    grads = [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]
    own, avg = local_grads(model, x, y), averaged_reference(model.get_weights())
    want = avg[:2] + [own[2] / hvd.size()]  # Dense 1 (kernel, bias) shared, Dense 2 local
    return max_err(grads, want)


def check_sync_batch_norm() -> float:
    """SyncBatchNormalization on each rank's rows equals BatchNormalization on all rows."""
    rows = [np.random.default_rng(200 + r).normal(r, 1 + r, size=(4, 2)) for r in range(hvd.size())]
    full = keras.layers.BatchNormalization()
    want = full(np.concatenate(rows), training=True).numpy()[4 * hvd.rank():4 * hvd.rank() + 4]
    sync = hvd.SyncBatchNormalization()
    got = sync(rows[hvd.rank()], training=True).numpy()
    stats = max_err([sync.moving_mean, sync.moving_variance],
                    [full.moving_mean, full.moving_variance])
    return max(max_err([got], [want]), stats)


def check_fit(epochs: int = 3) -> float:
    """model.fit with hvd.keras's optimizer and broadcast callback: ranks follow one run."""
    model = make_model(hvd.rank())  # different on each rank until the callback broadcasts
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(LR)), loss="mse")
    x, y = data(hvd.rank())
    model.fit(x, y, batch_size=3, epochs=epochs, shuffle=False, verbose=0,
              callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0)])
    ref = make_model(0)
    for _ in range(epochs):
        for b in range(2):  # two batches of 3 per epoch, in order
            grads = []
            for r in range(hvd.size()):
                xr, yr = data(r)
                grads.append(local_grads(ref, xr[3 * b:3 * b + 3], yr[3 * b:3 * b + 3]))
            ref.set_weights([w - LR * np.mean(gs, axis=0)
                             for w, gs in zip(ref.get_weights(), zip(*grads))])
    return max_err(model.get_weights(), ref.get_weights())


def main(out: str) -> None:
    """Run every check; rank 0 writes the errors."""
    hvd.init()
    errors = {"tape_eager": check_tape(False), "tape_function": check_tape(True),
              "broadcast_eager": check_broadcast(False),
              "broadcast_function": check_broadcast(True),
              "partial_tape": check_partial_tape(), "sync_batch_norm": check_sync_batch_norm(),
              "fit": check_fit()}
    if hvd.rank() == 0:
        with open(out, "w") as f:
            json.dump(errors, f)


if __name__ == "__main__":
    main(sys.argv[1])
