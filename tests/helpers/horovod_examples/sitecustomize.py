"""Loaded at start-up by every rank of Horovod's example scripts, which stay unedited
(scripts/horovod_examples.sh puts this folder first on PYTHONPATH). Each knob is off unless set:

DPTRAIN_MNIST=FILE.npz   keras.datasets.mnist.load_data() (Keras 3's and tf_keras's) reads FILE
                         instead of downloading MNIST: nothing can be downloaded here.
DPTRAIN_WEIGHTS_DIR=DIR  at exit, each rank writes DIR/rank-R.npz: every built Keras model's
                         trainable weights, for same_weights.py to compare across ranks (what
                         Horovod keeps equal; BatchNormalization's moving statistics are each
                         rank's own).
DPTRAIN_SKIP_ALLREDUCE=1 Horovod's allreduce returns each rank's own tensor: the negative
                         control, whose ranks must end apart.
DPTRAIN_KERAS2_CALLS=1   under Keras 3, the two Keras 2 calls the scripts make themselves work:
                         compile(experimental_run_tf_function=...) (dropped) and
                         optimizer.variables() (a list that can be called), so that a run
                         reaches Horovod's own code, which is what is tested under Keras 3.
"""
from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import os
import sys

# Where each Keras's mnist.load_data() looks up get_file(): patched in that module once loaded.
MNIST_MODULES = ("keras.src.datasets.mnist", "tf_keras.src.datasets.mnist")


def _serve_mnist(module) -> None:
    """load_data() gets the local file where it asked for Google's mnist.npz."""
    download = module.get_file

    def get_file(fname=None, origin=None, *args, **kwargs):
        if origin and origin.endswith("/mnist.npz"):
            return os.environ["DPTRAIN_MNIST"]
        return download(fname, origin, *args, **kwargs)

    module.get_file = get_file


def _skip_allreduce(module) -> None:
    """horovod.tensorflow's allreduce ops (single and grouped) hand back their input."""
    import tensorflow as tf

    module._allreduce = lambda tensor, *args, **kwargs: tf.identity(tensor)
    module._grouped_allreduce = lambda tensors, *args, **kwargs: [tf.identity(t) for t in tensors]


class _CallableList(list):
    """Keras 3's optimizer.variables, also callable as Keras 2's optimizer.variables()."""

    def __call__(self):
        return self


def _tolerate_compile_flag(module) -> None:
    """Trainer.compile() drops Keras 2's experimental_run_tf_function."""
    compile_ = module.Trainer.compile

    def compile(self, *args, experimental_run_tf_function=None, **kwargs):
        return compile_(self, *args, **kwargs)

    module.Trainer.compile = compile


def _callable_optimizer_variables(module) -> None:
    """BaseOptimizer.variables: Keras 3's list, callable too."""
    variables = module.BaseOptimizer.variables
    module.BaseOptimizer.variables = property(lambda self: _CallableList(variables.fget(self)))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a module right after it executes (before anyone uses its names)."""

    def __init__(self, hooks: dict):
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        hook = self.hooks.get(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path) if hook else None
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


def _rank() -> str | None:
    """This process's rank as its launcher (mpirun, Hydra, horovodrun --gloo) told it; None
    in a process that is no rank (horovodrun itself)."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK"):
        if os.environ.get(var):
            return os.environ[var]
    return None


# Where each Keras defines Model: every model made is kept here, since a script's model may be
# a local of its main() and gone by exit.
MODEL_MODULES = ("keras.src.models.model", "tf_keras.src.engine.training")
_MODELS: list = []


def _keep_models(module) -> None:
    """Model.__init__ (which every model's runs) also appends the model to _MODELS."""
    init = module.Model.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _MODELS.append(self)

    module.Model.__init__ = __init__


def _keras_models() -> list:
    """Every built Keras model made here (Keras 3's and tf_keras's), in the order made; one per
    set of variables (a Keras 3 Sequential builds a functional model over the same ones)."""
    found = {}
    for model in (m for m in _MODELS if getattr(m, "built", False)):
        found.setdefault(tuple(id(v) for v in model.trainable_weights), model)
    return list(found.values())


def _save_weights() -> None:
    """DIR/rank-R.npz: model i's trainable weight j under the key 'i.name.j'."""
    import numpy as np

    rank = _rank()
    if rank is None:
        return
    arrays = {f"{i}.{m.name}.{j}": np.asarray(w) for i, m in enumerate(_keras_models())
              for j, w in enumerate(m.trainable_weights)}
    path = os.path.join(os.environ["DPTRAIN_WEIGHTS_DIR"], f"rank-{rank}.npz")
    np.savez(path, **arrays)


def _install() -> None:
    hooks = {}
    if os.environ.get("DPTRAIN_MNIST"):
        hooks.update({name: _serve_mnist for name in MNIST_MODULES})
    if os.environ.get("DPTRAIN_SKIP_ALLREDUCE") == "1":
        hooks["horovod.tensorflow"] = _skip_allreduce
    if os.environ.get("DPTRAIN_KERAS2_CALLS") == "1":
        hooks["keras.src.trainers.trainer"] = _tolerate_compile_flag
        hooks["keras.src.optimizers.base_optimizer"] = _callable_optimizer_variables
    if os.environ.get("DPTRAIN_WEIGHTS_DIR"):
        hooks.update({name: _keep_models for name in MODEL_MODULES})
        atexit.register(_save_weights)
    if hooks:
        sys.meta_path.insert(0, _AfterImport(hooks))


_install()
