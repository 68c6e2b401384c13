"""Keras' own training of a --model, as an independent reference for train.py (no dptrain code).

Builds FUNCTION(input_shape, n_outputs) as train.py does (floatx = the dtype, Keras seeded by
the seed), then trains it full-batch with Keras' compile/fit and SGD, one step an epoch, and
prints {"loss": [...], "accuracy": [...]} as JSON: element k is measured at the weights after k
updates (fit reports each epoch's loss from the forward pass before that epoch's update; the
last comes from evaluate).

    python tests/helpers/keras_reference.py DATA.npz FILE.py:FUNCTION DTYPE STEPS LR SEED
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402


def main() -> None:
    data, spec, dtype, steps, lr, seed = sys.argv[1:]
    path, name = spec.rsplit(":", 1)
    module_spec = importlib.util.spec_from_file_location("reference_model", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    with np.load(data) as f:
        x, y = f["x"].astype(dtype), f["y"].astype(np.int64)
    keras.config.set_floatx(dtype)
    keras.utils.set_random_seed(int(seed))
    model = getattr(module, name)(x.shape[1:], int(y.max()) + 1)
    model.compile(optimizer=keras.optimizers.SGD(float(lr)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    history = model.fit(x, y, batch_size=len(x), epochs=int(steps), shuffle=False, verbose=0)
    loss, accuracy = model.evaluate(x, y, batch_size=len(x), verbose=0)
    print(json.dumps({"loss": history.history["loss"] + [loss],
                      "accuracy": history.history["accuracy"] + [accuracy]}))


if __name__ == "__main__":
    main()
