"""Horovod's start (with thread pools and device pinning), and the collectives of start-up:
agreement that every rank's start succeeded, and every rank's hostname."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import horovod.tensorflow as hvd
import tensorflow as tf

from dptrain import errors
from dptrain.outputs.report import hostname_row, hostnames_from
from dptrain.ranks import mpi_check, runtime, silence

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """Who this process is among the ranks of the job."""

    rank: int
    size: int
    local_rank: int
    local_size: int

    @property
    def is_chief(self) -> bool:
        """Rank 0 does every bit of I/O and logging; the others only compute."""
        return self.rank == 0


def start(cost: float | None) -> World:
    """Start Horovod (tuned for a step of `cost` multiply-adds, see runtime.fast_defaults),
    then configure TensorFlow for this rank before its runtime exists."""
    # Horovod: a collective that some rank never joins aborts the job instead of waiting
    # forever (warning after 60 s, shutdown after 120 s; both overridable).
    os.environ.setdefault("HOROVOD_STALL_CHECK_TIME_SECONDS", "60")
    os.environ.setdefault("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "120")
    runtime.fast_defaults(cost)
    # Horovod's MPI and the launcher's must be one: each rank decides alone (a collective is no
    # use when they are not), and the launcher's rank 0 says why.
    wrong_mpi = mpi_check.before_init()
    if wrong_mpi:
        errors.fail(wrong_mpi)
    hvd.init()  # Horovod: join the job; rank and size come from the launcher (MPI or Gloo)
    wrong_mpi = mpi_check.mismatch(hvd.size())
    if wrong_mpi:
        errors.fail(wrong_mpi)
    world = World(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size())
    runtime.size_thread_pools(world.local_size)
    _pin_device(world.local_rank)
    return world


def _pin_device(local_rank: int) -> None:
    """One GPU per local rank when there are GPUs; on a CPU-only build this is a no-op."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        gpu = gpus[local_rank % len(gpus)]
        tf.config.experimental.set_memory_growth(gpu, True)
        tf.config.set_visible_devices(gpu, "GPU")


def first_failing_rank(failed: bool, world: World) -> int | None:
    """Collective: the lowest rank that failed, or None; every rank must call it together.

    This is how a rank-local problem (a bad file on rank 0, say) stops every rank instead of
    leaving the others waiting in the next collective.
    """
    mine = tf.constant(world.rank if failed else world.size, tf.int32)
    # Horovod: the minimum over ranks; a rank that did not fail offers `size`, never a rank.
    lowest = int(hvd.allreduce(mine, op=hvd.Min, name="dptrain.failed").numpy())
    return None if lowest == world.size else lowest


def any_rank(flag: bool) -> bool:
    """Collective: whether `flag` is true on any rank; every rank must call it together."""
    # Horovod: the maximum over ranks of 0 or 1.
    return bool(hvd.allreduce(tf.constant(int(flag), tf.int32), op=hvd.Max,
                              name="dptrain.any").numpy())


def hostnames() -> list[str]:
    """Collective: every rank's hostname, in rank order (kept for silence.report)."""
    mine = tf.constant(hostname_row()[None, :])
    # Horovod: allgather stacks one row per rank, in rank order, on every rank.
    hosts = hostnames_from(hvd.allgather(mine, name="dptrain.hosts").numpy())
    silence.remember(hosts)
    return hosts


def agree(world: World, task: Callable[[], T]) -> T:
    """Run a rank-local task that may raise JobError; every rank stops if any rank failed."""
    return errors.agree(task, world.rank, lambda failed: first_failing_rank(failed, world))

