"""Process settings that must be in place before MPI and TensorFlow start (no heavy imports)."""
from __future__ import annotations

import ctypes
import os
import sys

from dptrain.ranks import launcher

# The tuned settings (bench/compare.py measures each); an environment value set by the user
# wins. Must be in place before MPI_Init, hence before hvd.init().
YIELD = {
    # Open MPI busy-polls by default. Every rank runs two busy threads (TensorFlow's and
    # Horovod's background thread), so even one rank per core oversubscribes: a spinning
    # waiter took the core from the thread it was waiting for (horovodrun -np 4 on 2 cores:
    # 18 ms/step instead of 3). Yielding costs nothing when nobody else wants the core.
    "OMPI_MCA_mpi_yield_when_idle": "1",
}
# Horovod's background thread wakes every HOROVOD_CYCLE_TIME ms (default 1) and agrees with the
# other ranks on what is ready; a step waits for the next wake-up. For a step of well under a
# millisecond that wait was most of the step: 0.05 ms cut the seed job's P=2 step from ~1.3
# to ~0.3 ms, and over MPI 0.01 ms with a tight timer slack (below) to ~0.2 ms (bench/
# compare.py's ladder). Gloo agrees over TCP, and there 0.01 ms took 2.5 ms a step against
# 0.8 at 0.05. For a long step the 20,000+ wake-ups a second only take CPU from the compute
# (large job, P=2: Gloo 980 -> 1500 ms, MPI 845 -> 874 ms): such jobs keep 1 ms.
SHORT_CYCLE = {"HOROVOD_CYCLE_TIME": "0.01"}
SHORT_CYCLE_GLOO = {"HOROVOD_CYCLE_TIME": "0.05"}
SHORT_STEP_COST = 10**6  # multiply-adds per rank per step below which a step is short


def short_step(cost: float) -> bool:
    """Whether a rank's step is short; `cost` is the multiply-adds of one forward pass over
    all rows (what a rank's step costs, times the rank count)."""
    return cost / launcher.size() < SHORT_STEP_COST


def fast_defaults(cost: float | None) -> None:
    """Set the tuned settings where the environment does not (see short_step for `cost`; a
    --model's, None, is taken as long)."""
    short = cost is not None and short_step(cost)
    cycle = SHORT_CYCLE_GLOO if launcher.gloo() else SHORT_CYCLE
    settings = YIELD | (cycle if short else {})
    for name, value in settings.items():
        os.environ.setdefault(name, value)
    if short:
        tight_timer_slack()


# Linux lets a sleep run late by the thread's timer slack, 50 us by default, so a 0.01-ms
# cycle slept ~0.06 ms. Threads inherit the slack of the thread that creates them: set
# before hvd.init(), it holds for Horovod's background thread. Seed job, P=2, MPI, cycle
# 0.01 ms: 284 -> 191 us a step (medians of 5 interleaved rounds).
# DPTRAIN_TIMER_SLACK_NS=50000 restores the kernel's default (bench/compare.py's ladder).
TIMER_SLACK = ("DPTRAIN_TIMER_SLACK_NS", "1000")
PR_SET_TIMERSLACK = 29  # <linux/prctl.h>


def tight_timer_slack() -> None:
    """Let this process's threads (and those it starts later) oversleep by 1 us, not 50."""
    if sys.platform.startswith("linux"):
        slack = int(os.environ.get(*TIMER_SLACK))
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, slack, 0, 0, 0)


def use_xla(choice: str, cost: float | None) -> bool:
    """--xla: on, off, or auto = only for long steps of the built-in network. XLA fuses a
    step's element-wise work (large job, P=2: 822 -> 502 ms) but adds a fixed cost per call
    that a short step cannot carry (seed job, P=1: 0.08 -> 0.2-0.55 ms). A --model's cost is
    unknown (None) and XLA may not compile every layer: auto leaves it off."""
    return choice == "on" or (choice == "auto" and cost is not None and not short_step(cost))


def size_thread_pools(local_size: int) -> None:
    """Give each of the ranks sharing a machine its share of the cores, so they do not fight."""
    cores = len(os.sched_getaffinity(0))
    threads = int(os.environ.get("OMP_NUM_THREADS") or max(1, cores // local_size))
    import tensorflow as tf  # here: the async server never loads TensorFlow
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)  # the graph is a chain: no parallel ops
