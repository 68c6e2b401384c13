"""One-line user-facing errors, printed by a single rank."""
from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import NoReturn, TypeVar

from dptrain.ranks import launcher, silence

T = TypeVar("T")

EXIT_USAGE = 2  # bad flags or input files, as argparse does


class JobError(Exception):
    """A problem the user can fix; its message is the whole report."""


# A launcher ends the whole job as soon as one rank exits non-zero, and Open MPI 5's drops what
# the others have not written yet (measured: the line lost in 2 of 6 runs). So the silent ranks
# leave last: they wait, at most this long, for the reporting rank to print and exit, and the
# launcher then ends them.
SILENT_RANK_WAIT_S = 10.0


def fail(message: str, rank: int | None = None, code: int = EXIT_USAGE) -> NoReturn:
    """Print `dptrain: error: message` once (from rank 0 unless told) and exit non-zero."""
    if (launcher.rank() if rank is None else rank) == 0:
        print(f"dptrain: error: {message}", file=sys.stderr, flush=True)
    elif launcher.size() > 1:
        time.sleep(SILENT_RANK_WAIT_S)
    sys.exit(code)


def agree(task: Callable[[], T], rank: int, lowest_failed: Callable[[bool], int | None]) -> T:
    """Run a rank-local task that may raise JobError, then stop every rank if any rank failed.

    lowest_failed is the collective (every rank calls it) that turns each rank's "I failed"
    into the lowest failing rank, or None: that rank prints its line, all exit 2, and no rank
    is left waiting in a later collective for one that has gone.
    """
    try:
        result, error = task(), None
    except JobError as e:
        result, error = None, str(e)
    bad = lowest_failed(error is not None)
    if bad is not None:
        fail(error or "", rank=0 if rank == bad else 1)
    return result


# How a rank learns that another one failed first: Horovod shuts down and every later
# collective raises with this text. Such a rank has nothing to add to the first one's line.
SECONDARY = "Horovod has been shut down"


def guard(main: Callable[[], None]) -> None:
    """Run main; an unexpected exception on any rank ends the whole job at once, with one line.

    The failing rank says `rank R: Type: message` and leaves at once with os._exit, skipping
    Horovod's and MPI's orderly shutdown (which would wait for the other ranks): the launcher
    (mpirun, horovodrun, srun -K) sees a rank gone and stops the rest. When another host of
    the job no longer answers on the network, the line names it instead (silence.py).
    DPTRAIN_TRACEBACK=1 also prints the traceback.
    """
    try:
        main()
    except Exception as e:  # noqa: BLE001 (JobError too; SystemExit and Ctrl-C pass through)
        text = str(e).strip()
        # A failed collective may mean a host went silent: then that is the news. (Hosts that
        # answer cost a few milliseconds to ask, and a one-host job none.)
        collective = not isinstance(e, JobError) and "horovod" in text.lower()
        silent = silence.silent_hosts(launcher.rank()) if collective else {}
        if silent:
            line = silence.report(launcher.rank(), silent)
            if line:
                print(f"dptrain: error: rank {launcher.rank()}: {line}", file=sys.stderr)
        elif SECONDARY not in text:
            kind = "" if isinstance(e, JobError) else f"{type(e).__name__}: "
            line = text.splitlines()[0] if text else "(no message)"
            print(f"dptrain: error: rank {launcher.rank()}: {kind}{line}", file=sys.stderr)
        if os.environ.get("DPTRAIN_TRACEBACK") == "1":
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_USAGE if isinstance(e, JobError) else 1)
