"""Asynchronous training, the contrasting design: rank 0 is a parameter server, the others
push gradients computed on the weights they last fetched (over mpi4py; job.py)."""
from dptrain.modes.mode import Lacks, Mode

MODE = Mode(
    "async", "rank 0 is a parameter server, the others push gradients",
    # The server applies each push as it comes, in NumPy: plain SGD, counted in updates.
    (Lacks("applies plain SGD for --steps updates", ("optimizer", "epochs", "checkpoint_every",
                                                     "resume", "checkpoint_on_signal")),
     Lacks("trains the built-in network on --loss mse",
           ("model", "crossentropy", "accumulate", "compression"), " (sync mode has them)"),
     # Its updates take the constant --lr and the raw gradient; no held-out rows.
     Lacks("trains at a constant --lr on the training rows",
           ("lr_schedule", "weight_decay", "clip_norm", "val_data"), " (sync mode has them)")))
