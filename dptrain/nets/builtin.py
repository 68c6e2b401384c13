"""The network: d inputs -> tanh hidden layers -> k linear outputs, on plain tf.Variables.

Plain tf.Module rather than Keras layers: Keras 3 variables lack .ref(), which
hvd.DistributedGradientTape needs (TensorFlow >= 2.16). Weight files hold W1, b1, ..., WL, bL
(the seed network 1 -> 5 -> 1: W1 (1,5), b1 (1,5), W2 (5,1), b2 (1,1)).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dptrain.errors import JobError


def param_shapes(widths: tuple[int, ...]) -> dict[str, tuple[int, int]]:
    """Shapes of the arrays of a network with these layer widths (inputs first)."""
    shapes = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:]), start=1):
        shapes[f"W{i}"], shapes[f"b{i}"] = (fan_in, fan_out), (1, fan_out)
    return shapes


def random_params(widths: tuple[int, ...], seed: int, dtype: np.dtype) -> dict[str, np.ndarray]:
    """Every weight and bias drawn from a standard normal, reproducibly from seed (drawn in
    float64, rounded to dtype: float32 and float64 runs start from the same numbers)."""
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(dtype) for k, s in param_shapes(widths).items()}


def check_arrays(arrays: dict, shapes: dict[str, tuple[int, ...]], where: str, dtype: np.dtype,
                 network: str) -> dict[str, np.ndarray]:
    """The arrays of these names and shapes, in dtype, or a JobError naming what does not fit
    (`network` says whose arrays they are)."""
    out = {}
    for name, shape in shapes.items():
        if name not in arrays:
            raise JobError(f"{where}: missing array {name} of {network}")
        a = arrays[name]
        if a.shape != shape:
            raise JobError(f"{where}: {name} has shape {a.shape}, expected {shape} for "
                           f"{network}")
        if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
            raise JobError(f"{where}: {name} holds non-finite or non-numeric values")
        out[name] = a.astype(dtype)
    return out


def check_params(arrays: dict, widths: tuple[int, ...], where: str,
                 dtype: np.dtype) -> dict[str, np.ndarray]:
    """The arrays of a built-in network of these widths, in dtype, or a JobError."""
    return check_arrays(arrays, param_shapes(widths), where, dtype,
                        f"a {'-'.join(map(str, widths))} network")


def load_params(path: str, check: Callable[[dict, str], dict[str, np.ndarray]]
                ) -> tuple[dict[str, np.ndarray], str]:
    """Read an --init-weights .npz and check it (a layout's check); (the checked arrays, the
    dtypes the file stored them in)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise JobError(f"--init-weights {path}: no such file") from None
    except Exception as e:  # noqa: BLE001 (np.load raises many types for a non-.npz file)
        raise JobError(f"--init-weights {path}: not a readable .npz file "
                       f"({type(e).__name__})") from None
    params = check(arrays, f"--init-weights {path}")
    return params, ", ".join(sorted({arrays[k].dtype.name for k in params}))


@dataclass(frozen=True)
class Builtin:
    """The built-in network's layout, without TensorFlow: its draw and its checks."""

    widths: tuple[int, ...]
    seed: int
    dtype: str

    def fresh(self) -> dict[str, np.ndarray]:
        """The seeded standard-normal draw."""
        return random_params(self.widths, self.seed, self.dtype)

    def check(self, arrays: dict, where: str) -> dict[str, np.ndarray]:
        """arrays as this network's weights in its dtype, or a JobError."""
        return check_params(arrays, self.widths, where, self.dtype)

    def describe(self) -> dict:
        """What a checkpoint records of the network."""
        return {"widths": list(self.widths)}


class MLP(tf.Module):
    """y = ... tanh(tanh(x W1 + b1) W2 + b2) ... WL + bL."""

    rows_independent = True  # each row's output depends on that row alone (row_blocks)

    def __init__(self, params: dict[str, np.ndarray]):
        super().__init__(name="mlp")
        self.names = sorted(params, key=lambda k: (int(k[1:]), k[0] == "b"))  # W1 b1 W2 b2 ...
        self.weights = [tf.Variable(params[k], name=k) for k in self.names]

    def __call__(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        layers = list(zip(self.weights[::2], self.weights[1::2]))
        for w, b in layers[:-1]:
            x = tf.tanh(_dense(x, w) + b)
        w, b = layers[-1]
        return _dense(x, w) + b

    def params(self) -> dict[str, np.ndarray]:
        """Current values as NumPy arrays, keyed as in the .npz format."""
        return {k: v.numpy() for k, v in zip(self.names, self.weights)}

    def assign(self, params: dict[str, np.ndarray]) -> None:
        """Set every weight from params (keyed as in the .npz format)."""
        for k, v in zip(self.names, self.weights):
            v.assign(params[k])


def _dense(x: tf.Tensor, w: tf.Variable) -> tf.Tensor:
    """x @ w; in float32, written as element-wise work where one side of the product is a
    single column: XLA then fuses it with the tanh and the reductions around it into fewer
    passes over the rows, where a dot with an inner or outer size of 1 is a kernel of its own
    and a round trip through memory. Measured on the large job (10^7 rows, P = 2, XLA):
    float32 165 -> 107 ms a step; float64 185 -> 210 ms (there XLA repeats the costly float64
    tanh in each fused loop instead), so float64 keeps the dot."""
    if w.dtype != tf.float32:
        return x @ w
    if w.shape[0] == 1:  # one input: an outer product
        return x * w
    if w.shape[1] == 1:  # one output: a weighted sum along the row
        return tf.reduce_sum(x * tf.transpose(w), axis=1, keepdims=True)
    return x @ w
