"""The built-in network's Trainer in one process over given rows (full batch, plain SGD at
0.01 unless told), for the in-process step tests; needs the hvd_single fixture's Horovod."""
from __future__ import annotations

import numpy as np


def one_process_trainer(p: dict, x: np.ndarray, y: np.ndarray, n: int | None = None,
                        **options):
    """A Trainer of MLP(p) over rows x, y (n: the global row count, default len(x)) with
    StepOptions(**options)."""
    from dptrain.nets.builtin import MLP
    from dptrain.step.batches import Schedule
    from dptrain.step.loop import StepOptions, Trainer
    from dptrain.step.optim import Hyper, Optimizer
    model = MLP(p)
    n = len(x) if n is None else n
    return Trainer(model, Optimizer(model.weights, model.names, Hyper("sgd", 0.01)), x, y, n,
                   Schedule(n, 1, 0, len(x), n, 0, False), StepOptions(**options))
