"""Stopping on a scheduler's signal, for --checkpoint-on-signal.

Slurm warns a job before its time limit with the signal that `sbatch --signal` names (train.sbatch
asks for SIGUSR1) and ends a preempted, requeued or cancelled job with SIGTERM, then SIGKILL
after its KillWait. Either signal only records that a stop was asked: the ranks agree at their
next logged step that one of them got it, rank 0 writes a checkpoint there, and every rank exits
with EXIT_REQUEUE (and rank 0 writes OUTPUT_DIR/STOPPED), so that the job script can requeue
the job and --resume goes on from there. A signal that reached the job script before it started
the ranks comes to them as DPTRAIN_STOP_SIGNAL in their environment, asked for from the start.
"""
from __future__ import annotations

import os
import signal

SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
# sysexits' EX_TEMPFAIL, "try again later": stopped at a checkpoint, not finished, not failed.
EXIT_REQUEUE = 75
STOPPED = "STOPPED"  # in OUTPUT_DIR: the step a stop checkpointed (train.sbatch reads it)
ASKED = "DPTRAIN_STOP_SIGNAL"  # e.g. SIGUSR1: the job script got it before the ranks started
_received: list[str] = []


def hold() -> None:
    """Until install() or release(): SIGUSR1 and SIGTERM are recorded, not acted on. A job
    script passes Slurm's warning on as soon as the ranks exist, which may be while Python is
    still loading them; by default SIGUSR1 would end them there."""
    for s in SIGNALS:
        signal.signal(s, _record)


def release() -> None:
    """Without --checkpoint-on-signal: the signals' default actions again, and one that came
    while they were held acts now."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    for name in list(_received):
        os.kill(os.getpid(), signal.Signals[name])


def install() -> None:
    """From now on SIGUSR1 and SIGTERM ask for a stop instead of ending the process; a stop
    the job script passes on in the environment is asked for already."""
    hold()
    if os.environ.get(ASKED):
        _received.append(os.environ[ASKED])


def _record(signum: int, frame) -> None:
    # A signal handler runs between two Python bytecodes: record, nothing else.
    _received.append(signal.Signals(signum).name)


def received() -> str | None:
    """The first stop signal this process got (e.g. 'SIGUSR1'), or None."""
    return _received[0] if _received else None
