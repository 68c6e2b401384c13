"""One-line user-facing errors, printed by a single rank."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

T = TypeVar("T")

# Where each launcher puts the process's global rank, readable before MPI/Horovod start.
RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
EXIT_USAGE = 2  # bad flags or input files, as argparse does


class JobError(Exception):
    """A problem the user can fix; its message is the whole report."""


def launcher_rank() -> int:
    """This process's rank as the launcher set it (0 when run alone)."""
    for var in RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def fail(message: str, rank: int | None = None, code: int = EXIT_USAGE) -> NoReturn:
    """Print `dptrain: error: message` once (from rank 0 unless told) and exit non-zero."""
    if (launcher_rank() if rank is None else rank) == 0:
        print(f"dptrain: error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def agree(work: Callable[[], T], rank: int, lowest_failed: Callable[[bool], int | None]) -> T:
    """Run rank-local work that may raise JobError, then stop every rank if any rank failed.

    lowest_failed is the collective (every rank calls it) that turns each rank's "I failed"
    into the lowest failing rank, or None: that rank prints its line, all exit 2, and no rank
    is left waiting in a later collective for one that has gone.
    """
    try:
        result, error = work(), None
    except JobError as e:
        result, error = None, str(e)
    bad = lowest_failed(error is not None)
    if bad is not None:
        fail(error or "", rank=0 if rank == bad else 1)
    return result
