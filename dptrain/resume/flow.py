"""Stop and resume, as a job goes through them: rank 0's checkpoints, the stop at a signal,
and the resume from the newest valid checkpoint.

The pieces under it: preempt.py (which signals ask for a stop, and the exit status that says
"stopped, requeue me"), checkpoint.py (the files). A stop is asked for by a signal, agreed on
by the ranks at a logged step (`loop.Hooks.stop`, raising `loop.Stopped`), checkpointed by
rank 0 here, and gone on from by --resume (train.sbatch requeues the job, see
docs/launching.md).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

from dptrain import cli
from dptrain.errors import JobError
from dptrain.outputs import report
from dptrain.resume import checkpoint, preempt


def checkpoint_dir(config: cli.Config) -> str:
    """Where checkpoints are written and --resume looks."""
    return os.path.join(config.output_dir, "checkpoints")


def resumed(config: cli.Config, ranks: int, layout) -> tuple:
    """(params, slots, step) of the newest valid checkpoint, checked against this run (layout:
    a nets.build.Layout); (None, None, 0) when there is none."""
    found = checkpoint.latest_valid(checkpoint_dir(config))
    if found is None:
        report.warn("--resume: no valid checkpoint, starting from step 0")
        return None, None, 0
    params, slots, meta = found
    where = f"checkpoint of step {meta['step']}"
    made_in = meta.get("dtype") or next(iter(params.values())).dtype.name  # older: from W1
    params = layout.check(params, where)
    if meta["optimizer"] != config.optimizer:
        raise JobError(f"{where} was made with --optimizer {meta['optimizer']}, "
                       f"this run uses {config.optimizer}")
    if made_in != config.dtype:  # its slots and its exact resume are of that precision
        raise JobError(f"{where} was made with --dtype {made_in}, this run uses "
                       f"{config.dtype}: resume with --dtype {made_in}")
    if meta["ranks"] != ranks:
        report.warn(f"resuming a {meta['ranks']}-rank run on {ranks} ranks: full-batch "
                    "steps are unchanged, mini-batches from here on differ from the original's")
    report.say(f"resuming from the {where}")
    return params, slots, meta["step"]


def checkpointer(config: cli.Config, ranks: int, layout, model, opt) -> Callable[[int], str]:
    """Rank 0's save(step): a checkpoint of the weights, optimizer slots and this run's shape."""
    def save(step: int) -> str:
        meta = {"config": config.as_dict(), "ranks": ranks, "optimizer": config.optimizer,
                "dtype": config.dtype} | layout.describe()
        return checkpoint.save(checkpoint_dir(config), step, model.params(), opt.state(), meta,
                               config.keep_checkpoints)
    return save


def stopped(config: cli.Config, is_chief: bool, save: Callable[[int], str] | None, step: int,
            saved: bool, steps: int) -> NoReturn:
    """After a stop signal: rank 0 checkpoints the step all stopped after (unless saved
    already) and says so; every rank exits with preempt.EXIT_REQUEUE once it is on disk."""
    from dptrain.ranks import distributed
    if is_chief:
        path = checkpoint.path_for(checkpoint_dir(config), step) if saved else save(step)
        # Also as a file: a launcher that ends the others at the first exit (srun -K) may turn
        # the ranks' common exit status into another one.
        report.atomic_write(os.path.join(config.output_dir, preempt.STOPPED),
                            lambda f: f.write(f"{step}\n".encode()))
        report.say(f"stopped by {preempt.received() or 'a stop signal to another rank'} "
                   f"after step {step} of {steps}: checkpoint {path}; --resume goes on from it")
    # Horovod: no rank leaves before that, since a launcher ends the job at the first exit.
    distributed.any_rank(False)
    sys.stdout.flush()
    sys.exit(preempt.EXIT_REQUEUE)
