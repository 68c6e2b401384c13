"""Elastic synchronous training: the sync step inside Horovod's elastic loop, so the job goes
on when ranks leave or join (horovodrun --gloo with --host-discovery-script; job.py)."""
from dptrain.modes.mode import Lacks, Mode

MODE = Mode(
    "elastic", "sync, going on when ranks leave or join (horovodrun --gloo with "
    "--host-discovery-script; docs/launching.md)",
    # Horovod's elastic state is the weights and the step: no shuffle position, and a restart
    # rolls back to the last commit instead of a checkpoint.
    (Lacks("trains full-batch", ("batch_size", "checkpoint_every", "resume",
                                 "checkpoint_on_signal")),
     # Its step is the built-in network's; a --model's variables are not in its state.
     Lacks("trains the built-in network on --loss mse",
           ("model", "crossentropy", "accumulate", "compression"), " (sync mode has them)"),
     # Its updates take the constant --lr and the raw gradient; no held-out rows.
     Lacks("trains at a constant --lr on the training rows",
           ("lr_schedule", "weight_decay", "clip_norm", "val_data"), " (sync mode has them)")))
