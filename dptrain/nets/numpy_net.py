"""The network in NumPy: forward pass and squared error, for figures and the async server."""
from __future__ import annotations

import numpy as np


def forward(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """tanh hidden layers, linear output; params keyed W1, b1, ..., WL, bL."""
    layers = len(params) // 2
    for i in range(1, layers + 1):
        x = x @ params[f"W{i}"] + params[f"b{i}"]
        if i < layers:
            x = np.tanh(x)
    return x


def squared_error(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Sum of squared errors over the rows."""
    return float(np.sum((forward(params, x) - y) ** 2))
