"""The network: 1 input -> hidden tanh units -> 1 linear output, on plain tf.Variables.

Plain tf.Module rather than Keras layers: Keras 3 variables lack .ref(), which
hvd.DistributedGradientTape needs (TensorFlow >= 2.16).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from .data import DTYPE
from .errors import JobError

PARAM_NAMES = ("W1", "b1", "W2", "b2")


def param_shapes(hidden: int) -> dict[str, tuple[int, int]]:
    """Shapes of the four arrays, as stored in an --init-weights / weights.npz file."""
    return {"W1": (1, hidden), "b1": (1, hidden), "W2": (hidden, 1), "b2": (1, 1)}


def random_params(hidden: int, seed: int) -> dict[str, np.ndarray]:
    """Every weight and bias drawn from a standard normal, reproducibly from seed."""
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(DTYPE) for k, s in param_shapes(hidden).items()}


def load_params(path: str, hidden: int) -> dict[str, np.ndarray]:
    """Read and check an .npz of W1, b1, W2, b2 for a network of `hidden` units."""
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise JobError(f"--init-weights {path}: no such file") from None
    except Exception as e:  # np.load raises many types for a file that is not an .npz
        raise JobError(f"--init-weights {path}: not a readable .npz file ({type(e).__name__})") from None
    out = {}
    for name, shape in param_shapes(hidden).items():
        if name not in arrays:
            raise JobError(f"--init-weights {path}: missing array {name}")
        a = arrays[name]
        if a.shape != shape:
            raise JobError(f"--init-weights {path}: {name} has shape {a.shape}, expected {shape} "
                           f"for --hidden {hidden}")
        if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
            raise JobError(f"--init-weights {path}: {name} holds non-finite or non-numeric values")
        out[name] = a.astype(DTYPE)
    return out


class MLP(tf.Module):
    """y = tanh(x W1 + b1) W2 + b2."""

    def __init__(self, params: dict[str, np.ndarray]):
        super().__init__(name="mlp")
        self.W1, self.b1, self.W2, self.b2 = (tf.Variable(params[k], name=k) for k in PARAM_NAMES)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.tanh(x @ self.W1 + self.b1) @ self.W2 + self.b2

    def params(self) -> dict[str, np.ndarray]:
        """Current values as NumPy arrays, keyed as in the .npz format."""
        return {k: getattr(self, k).numpy() for k in PARAM_NAMES}
