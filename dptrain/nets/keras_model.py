"""--model FILE.py:FUNCTION or package.module:FUNCTION: the user's Keras 3 model, made ready for
the same training path as the built-in network.

FUNCTION(input_shape, n_outputs) returns a keras.Model whose output is one row of n_outputs
per input row (regression targets, or logits for --loss crossentropy). The job trains the
tf.Variables its trainable variables wrap: Horovod, the optimizers, checkpoints and the
compiled step then see plain variables, as with the built-in network.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable

import numpy as np

from dptrain.errors import JobError


def load_function(spec: str) -> Callable:
    """The FUNCTION of FILE.py:FUNCTION or package.module:FUNCTION; a JobError if it is not
    there."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise JobError(f"--model {spec}: expected FILE.py:FUNCTION or package.module:FUNCTION")
    try:
        module = _import(where)
    except JobError:
        raise
    except Exception as e:  # noqa: BLE001 (the user's module may raise anything at import)
        raise JobError(f"--model {spec}: importing {where} raised {type(e).__name__}: "
                       f"{_first_line(e)}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise JobError(f"--model {spec}: {where} has no function {name}")
    return function


def _import(where: str):
    """The module of a .py path or a dotted name."""
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise JobError(f"--model {where}: no such file")
        name = "dptrain_user_model_" + os.path.splitext(os.path.basename(where))[0]
        spec = importlib.util.spec_from_file_location(name, where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        if e.name and where.startswith(e.name):  # the module itself, not one it imports
            raise JobError(f"--model {where}: no module named {e.name}") from None
        raise


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


def build(spec: str, input_shape: tuple[int, ...], n_outputs: int, dtype: str,
          seed: int) -> KerasNet:
    """Call FUNCTION(input_shape, n_outputs) with Keras in dtype and seeded (so rank 0 draws
    the same initial weights in every run), and check what it returns."""
    function = load_function(spec)
    import keras
    keras.config.set_floatx(dtype)  # layers built without a dtype compute in the run's
    keras.utils.set_random_seed(seed)
    try:
        model = function(tuple(input_shape), n_outputs)
    except Exception as e:  # noqa: BLE001
        raise JobError(f"--model {spec}: {function.__name__}{(tuple(input_shape), n_outputs)} "
                       f"raised {type(e).__name__}: {_first_line(e)}") from None
    if not isinstance(model, keras.Model):
        raise JobError(f"--model {spec}: returned {type(model).__name__}, not a keras.Model")
    try:
        out = model(np.zeros((2, *input_shape), dtype))  # builds its variables
    except Exception as e:  # noqa: BLE001
        raise JobError(f"--model {spec}: the model fails on input of shape "
                       f"{(None, *input_shape)}: {type(e).__name__}: {_first_line(e)}") from None
    got, want = (None, *tuple(out.shape)[1:]), (None, n_outputs)
    if got != want:
        raise JobError(f"--model {spec}: its output has shape {got}, the data needs {want}")
    return KerasNet(model, spec, dtype)


class KerasNet:
    """A built Keras model as the trainer sees a network: weights, names, a call, params."""

    def __init__(self, model, spec: str, dtype: str):
        self.model, self.spec, self.dtype = model, spec, dtype
        problem = _unsupported(model, dtype)
        if problem:
            raise JobError(f"--model {spec}: {problem}")
        variables = model.trainable_variables
        # The tf.Variable each Keras 3 variable wraps: it has .ref(), assigns and broadcasts.
        self.weights = [v.value for v in variables]
        self.names = [f"{i:03d}.{v.path.replace('/', '.')}" for i, v in enumerate(variables)]
        self._initial = self.params()

    def __call__(self, x, training: bool = False):
        return self.model(x, training=training)

    def params(self) -> dict[str, np.ndarray]:
        """Current values as NumPy arrays, keyed by position and Keras path."""
        return {k: v.numpy() for k, v in zip(self.names, self.weights)}

    def assign(self, params: dict[str, np.ndarray]) -> None:
        """Set every weight from params (checked by check())."""
        for name, v in zip(self.names, self.weights):
            v.assign(params[name])

    # The layout side (nets/build.py): what a fresh start draws, what a loaded file must hold.
    def fresh(self) -> dict[str, np.ndarray]:
        """The weights the model was built with (Keras' initialisers, seeded by --seed)."""
        return self._initial

    def check(self, arrays: dict, where: str) -> dict[str, np.ndarray]:
        """arrays as this model's weights in its dtype, or a JobError naming what does not fit."""
        from dptrain.nets.builtin import check_arrays
        shapes = {name: tuple(v.shape) for name, v in zip(self.names, self.weights)}
        return check_arrays(arrays, shapes, where, self.dtype, f"--model {self.spec}")

    def describe(self) -> dict:
        """What a checkpoint records of the network."""
        return {"model": self.spec, "names": self.names}


def _unsupported(model, dtype: str) -> str | None:
    """Why the job cannot train this model exactly, or None."""
    if not model.trainable_variables:
        return "the model has no trainable variables"
    if model.non_trainable_variables:  # e.g. BatchNormalization's moving statistics
        v = model.non_trainable_variables[0]
        return (f"non-trainable state such as {v.path} is updated by each rank on its own "
                "rows and would differ between ranks; use layers without it "
                "(LayerNormalization instead of BatchNormalization)")
    odd = [v for v in model.trainable_variables if v.dtype != dtype]
    if odd:
        return (f"variable {odd[0].path} is {odd[0].dtype}, the run's --dtype is {dtype}; "
                "build layers without an explicit dtype")
    return None
