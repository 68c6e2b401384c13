"""One rank of the checks of Horovod's Keras API under Keras 3 (run under mpirun by
test_keras_api.py): the paths that Horovod's own tests reach only through Keras 2 code.

As in keras3_worker.py, each reference is computed by every rank alone in float64 from all
ranks' data (derived from the rank number), with no Horovod collective. Rank 0 writes
{check: largest error} as JSON.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

# Keras 3 through tf.keras even in a KERAS=2 venv (whose .pth sets tf.keras to tf_keras).
os.environ["TF_USE_LEGACY_KERAS"] = "0"

import keras  # noqa: E402
import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
import horovod.keras as hvd_keras_standalone  # Horovod's API for `import keras` (Keras 3 here)
import horovod.tensorflow.keras as hvd_keras
from keras3_worker import LR, data, local_grads, make_model, max_err


def mean_grads(weights: list[np.ndarray], rows: slice) -> list[np.ndarray]:
    """The mean over ranks of each rank's gradient on its rows `rows`, at `weights`."""
    model = make_model(0)
    model.set_weights(weights)
    per_rank = [local_grads(model, data(r)[0][rows], data(r)[1][rows]) for r in range(hvd.size())]
    return [np.mean(gs, axis=0) for gs in zip(*per_rank)]


def fit(opt, callbacks=(), model=None, batch_size: int = 3) -> keras.Model:
    """model.fit, one epoch over this rank's 6 rows in order, the weights of rank 0 on all."""
    model = model or make_model(0)
    model.compile(optimizer=opt, loss="mse")
    x, y = data(hvd.rank())
    model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
              callbacks=list(callbacks))
    return model


def check_accumulate() -> float:
    """backward_passes_per_step=2 in model.fit: two batches' gradients summed, then one update."""
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(LR), backward_passes_per_step=2)
    model = fit(opt, batch_size=2)  # 3 batches: an update after the second only
    w = make_model(0).get_weights()
    summed = [a + b for a, b in zip(mean_grads(w, slice(0, 2)), mean_grads(w, slice(2, 4)))]
    want = [wi - LR * g for wi, g in zip(w, summed)]
    return max_err(model.get_weights(), want)


def check_apply() -> float:
    """Keras 3's optimizer.apply(grads, vars) from a custom loop is allreduced too."""
    model = make_model(0)
    w0 = model.get_weights()
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(LR))
    grads = local_grads(model, *data(hvd.rank()))
    opt.apply([tf.constant(g) for g in grads], model.trainable_variables)
    want = [w - LR * g for w, g in zip(w0, mean_grads(w0, slice(None)))]
    return max_err(model.get_weights(), want)


def check_partial_optimizer() -> float:
    """PartialDistributedOptimizer in model.fit: the local layer's gradient stays this rank's
    (divided by the size), the others' are averaged."""
    model = make_model(0)
    opt = hvd_keras_standalone.PartialDistributedOptimizer(keras.optimizers.SGD(LR),
                                                           local_layers=[model.layers[1]])
    model = fit(opt, model=model, batch_size=6)
    w0 = make_model(0).get_weights()
    ref = make_model(0)
    own, avg = local_grads(ref, *data(hvd.rank())), mean_grads(w0, slice(None))
    grads = avg[:2] + [g / hvd.size() for g in own[2:]]  # Dense 2 (kernel, bias) local
    return max_err(model.get_weights(), [w - LR * g for w, g in zip(w0, grads)])


def check_sparse_as_dense() -> float:
    """An Embedding's sparse gradient, allreduced as dense, in model.fit."""
    def embedding_model() -> keras.Model:
        init = keras.initializers.RandomNormal(seed=7)
        return keras.Sequential([keras.Input((2,), dtype="int32"),
                                 keras.layers.Embedding(5, 3, embeddings_initializer=init),
                                 keras.layers.Flatten(), keras.layers.Dense(1, kernel_initializer=init)])

    def rows(r: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(300 + r)
        return rng.integers(0, 5, size=(4, 2)).astype("int32"), rng.normal(size=(4, 1))

    model = embedding_model()
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(LR),
                                                           sparse_as_dense=True), loss="mse")
    model.fit(*rows(hvd.rank()), batch_size=4, epochs=1, verbose=0)
    ref = embedding_model()
    w0 = ref.get_weights()
    grads = []
    for r in range(hvd.size()):
        x, y = rows(r)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((ref(x) - y) ** 2)
        grads.append([tf.convert_to_tensor(g).numpy() for g in
                      tape.gradient(loss, ref.trainable_variables)])
    want = [w - LR * np.mean(gs, axis=0) for w, gs in zip(w0, zip(*grads))]
    return max_err(model.get_weights(), want)


def check_broadcast_local_vars() -> float:
    """BroadcastGlobalVariablesCallback(local_variables=...): those keep this rank's values."""
    root = hvd.size() - 1
    model = make_model(hvd.rank())
    local = list(model.layers[0].variables)
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.0))  # lr 0: only the broadcast
    fit(opt, [hvd_keras.callbacks.BroadcastGlobalVariablesCallback(root, local_variables=local)],
        model=model)
    own, rooted = make_model(hvd.rank()).get_weights(), make_model(root).get_weights()
    return max_err(model.get_weights(), own[:2] + rooted[2:])


def warmup_lr(epoch: float, initial: float, warmup: int) -> float:
    """Horovod's documented warm-up: from initial/size to initial over `warmup` epochs."""
    size = hvd.size()
    return initial / size * (epoch * (size - 1) / warmup + 1)


def check_lr_warmup() -> float:
    """LearningRateWarmupCallback: each batch's lr as documented; momentum correction scales
    the velocities by new_lr / old_lr (the step is replayed here with those rules)."""
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda b, logs: seen.append(float(opt.learning_rate.numpy())))
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=0.9))
    warm = hvd_keras.callbacks.LearningRateWarmupCallback(initial_lr=LR, warmup_epochs=2,
                                                          steps_per_epoch=2)
    # Order matters: the warm-up sets the batch's lr before it is recorded.
    model = fit(opt, [warm, record], batch_size=3)
    lrs = [warmup_lr(b / 2 + 1 / 2, LR, 2) for b in range(2)]
    w, v, old = make_model(0).get_weights(), None, LR
    for b, lr in enumerate(lrs):
        g = mean_grads(w, slice(3 * b, 3 * b + 3))
        v = [np.zeros_like(x) for x in w] if v is None else [vi * lr / old for vi in v]
        v = [0.9 * vi - lr * gi for vi, gi in zip(v, g)]
        w, old = [wi + vi for wi, vi in zip(w, v)], lr
    return max(max_err([seen], [lrs]), max_err(model.get_weights(), w))


def check_metric_average() -> float:
    """MetricAverageCallback: the epoch's logged loss is the mean of the ranks' losses."""
    logged = {}
    keep = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: logged.update(logs))
    model = make_model(0)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    model.fit(*data(hvd.rank()), batch_size=6, epochs=1, verbose=0,
              callbacks=[hvd_keras.callbacks.MetricAverageCallback(), keep])
    ref = make_model(0)
    losses = [float(np.mean((ref(data(r)[0]).numpy() - data(r)[1]) ** 2)) for r in range(hvd.size())]
    return abs(logged["loss"] - np.mean(losses))


def check_load_model() -> float:
    """hvd.keras.load_model: a saved model comes back with its optimizer allreducing again."""
    model = make_model(0)
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(LR)), loss="mse")
    path = os.path.join(tempfile.mkdtemp(), f"rank{hvd.rank()}.keras")
    model.save(path)
    loaded = hvd_keras.load_model(path)
    w0 = loaded.get_weights()
    loaded.fit(*data(hvd.rank()), batch_size=6, epochs=1, shuffle=False, verbose=0)
    want = [w - LR * g for w, g in zip(w0, mean_grads(w0, slice(None)))]
    return max_err(loaded.get_weights(), want)


CHECKS = {"accumulate": check_accumulate, "apply": check_apply,
          "partial_optimizer": check_partial_optimizer,
          "sparse_as_dense": check_sparse_as_dense,
          "broadcast_local_vars": check_broadcast_local_vars, "lr_warmup": check_lr_warmup,
          "metric_average": check_metric_average, "load_model": check_load_model}


def main(out: str) -> None:
    """Run every check; rank 0 writes the errors."""
    hvd.init()
    errors = {name: float(check()) for name, check in CHECKS.items()}
    if hvd.rank() == 0:
        with open(out, "w") as f:
            json.dump(errors, f)


if __name__ == "__main__":
    main(sys.argv[1])
