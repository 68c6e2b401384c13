"""One-line user-facing errors, printed by a single rank."""
from __future__ import annotations

import os
import sys
from typing import NoReturn

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
