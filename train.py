"""Synchronous data-parallel training of a small tanh network with Horovod (default: 1 -> 5 -> 1
on y = x^2, full-batch gradient descent, lr 0.01, 2000 steps).

Each rank reads only its contiguous slice of the N samples, computes that slice's share of the
gradient, Horovod sums the shares by ring-allreduce, and every rank applies the same update:
full-batch runs equal single-process gradient descent for any N and any number of ranks.
examples/synchronous.py is this job in one file; this entry point adds the flags, data files,
checkpoints, outputs and fault handling; dptrain/modes/sync/job.py is the synchronous job.

    python train.py                                   # one process
    horovodrun -np 4 python train.py                  # four ranks on this machine
    mpirun -np 4 --bind-to none --map-by slot python train.py
    HOSTFILE=hostfile NP=8 ./launch.sh --steps 5000   # a cluster, through mpirun
    sbatch -N 2 train.sbatch --steps 5000             # a Slurm batch job
    HOSTS_FILE=hosts horovodrun --gloo -np 3 --min-np 2 \
        --host-discovery-script scripts/discover_hosts.sh python train.py --mode elastic
    python train.py --help                            # every flag and its default
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter off

# A scheduler's signal that comes while Python loads is kept, not fatal, until the flags say
# what it means (--checkpoint-on-signal: a stop at a checkpoint; else its default action).
from dptrain.resume import preempt  # noqa: E402

preempt.hold()

# These load no TensorFlow; the modules that do are imported once the flags are known good.
from dptrain import cli, modes  # noqa: E402
from dptrain.errors import guard  # noqa: E402
from dptrain.modes import start  # noqa: E402


def main() -> None:
    """Check the flags, open the data, run the chosen mode."""
    config = cli.parse()  # flags are checked before TensorFlow loads: a typo fails at once
    if config.checkpoint_on_signal:  # before TensorFlow loads: a signal then is kept too
        preempt.install()
    else:
        preempt.release()
    source = start.data(config)  # every rank; a bad --data file fails here, at once
    held_out = start.held_out(config, source)  # and a bad --val-data file
    if config.check:  # a job script's one-process check before it starts the ranks
        return
    # sync: Horovod's allreduce; elastic: the same, going on when ranks leave or join;
    # async: the contrasting design, a parameter server over mpi4py (dptrain/modes/).
    modes.run(config, source, held_out)


if __name__ == "__main__":
    guard(main)  # any rank's unexpected error ends the whole job at once, with one line
