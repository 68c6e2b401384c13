"""Stopping on a scheduler's signal, for --checkpoint-on-signal.

Slurm warns a job before its time limit with the signal that `sbatch --signal` names (train.sbatch
asks for SIGUSR1) and ends a preempted, requeued or cancelled job with SIGTERM, then SIGKILL
after its KillWait. Either signal only records that a stop was asked: the ranks agree at their
next logged step that one of them got it, rank 0 writes a checkpoint there, and every rank exits
with EXIT_REQUEUE (and rank 0 writes OUTPUT_DIR/STOPPED), so that the job script can requeue
the job and --resume goes on from there.
"""
from __future__ import annotations

import signal

SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
# sysexits' EX_TEMPFAIL, "try again later": stopped at a checkpoint, not finished, not failed.
EXIT_REQUEUE = 75
STOPPED = "STOPPED"  # in OUTPUT_DIR: the step a stop checkpointed (train.sbatch reads it)
_received: list[str] = []


def install() -> None:
    """From now on SIGUSR1 and SIGTERM ask for a stop instead of ending the process."""
    for s in SIGNALS:
        signal.signal(s, _record)


def _record(signum: int, frame) -> None:
    # A signal handler runs between two Python bytecodes: record, nothing else.
    _received.append(signal.Signals(signum).name)


def received() -> str | None:
    """The first stop signal this process got (e.g. 'SIGUSR1'), or None."""
    return _received[0] if _received else None
