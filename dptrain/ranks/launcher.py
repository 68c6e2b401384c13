"""What the launcher told this process before MPI/Horovod start: its rank and the rank count."""
from __future__ import annotations

import os

# Where horovodrun (Gloo), Open MPI, MPICH/Hydra, PMIx and srun put them, in that order.
RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
SIZE_VARS = ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def _first(names: tuple[str, ...], alone: int) -> int:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return alone


def gloo() -> bool:
    """Whether horovodrun started this process to coordinate over Gloo (--gloo, elastic)."""
    return "HOROVOD_GLOO_RENDEZVOUS_ADDR" in os.environ


def rank() -> int:
    """This process's global rank (0 when run alone)."""
    return _first(RANK_VARS, 0)


def size() -> int:
    """The number of ranks (1 when run alone)."""
    return _first(SIZE_VARS, 1)
