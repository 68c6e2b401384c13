"""Synchronous training (the default): every rank computes its slice's share of the gradient,
Horovod sums the shares by allreduce, every rank applies the same update (job.py)."""
from dptrain.modes.mode import Mode

MODE = Mode("sync", "Horovod allreduce: every update uses every rank's gradient")  # has it all
