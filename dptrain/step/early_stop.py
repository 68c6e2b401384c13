"""--early-stop: the best held-out loss so far, the step and weights that had it, and when
to give up.

Every rank holds the same held-out loss (one allreduce), so every rank keeps the same best
weights and stops after the same step; no collective is needed here.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np


class EarlyStop:
    """Stops after `patience` validations in a row without a lower held-out loss."""

    def __init__(self, patience: int, params: Callable[[], dict[str, np.ndarray]]):
        self.patience, self._params = patience, params
        self.best_loss, self.best_step, self.best = float("inf"), None, None
        self.waited, self.stopped_at = 0, None

    def __call__(self, step: int, val_loss: float) -> bool:
        """After validating step `step`: keep its weights if they are the best; stop now?"""
        if val_loss < self.best_loss:  # a NaN is never better
            self.best_loss, self.best_step, self.best = val_loss, step, self._params()
            self.waited = 0
            return False
        self.waited += 1
        if self.waited >= self.patience:
            self.stopped_at = step
        return self.stopped_at is not None
