"""What every mode does before its first step: the data source, the network's shape, the
initial weights (a checkpoint, --init-weights or the seeded draw), and rank 0's outputs.

Nothing here is a collective: each mode runs these steps under its own agreement (Horovod's
for sync, mpi4py's for async, none for elastic, whose late ranks run them alone), so that a
rank that fails here stops every rank with one line.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from . import cli, launcher, outputs
from .data import Source, open_source
from .errors import JobError, fail


@dataclass(frozen=True)
class Start:
    """Where a run begins: weights, optimizer slots (on resume), step, and rank 0's reporter."""

    params: dict[str, np.ndarray]
    slots: dict[str, np.ndarray] | None
    step: int
    reporter: outputs.Reporter


def data(config: cli.Config) -> Source:
    """The run's data source, opened by every rank before TensorFlow loads; a missing or
    malformed --data file fails every rank alike, so rank 0's one line is the whole report."""
    try:
        return open_source(config.data, config.target, config.n_points, config.dtype)
    except JobError as e:
        fail(str(e))


def widths(config: cli.Config, source: Source) -> tuple[int, ...]:
    """Layer widths, inputs first: the data's width, --hidden, the target's width."""
    return (source.inputs, *config.hidden, source.outputs)


def step_cost(source: Source, widths_: tuple[int, ...]) -> int:
    """Multiply-adds of one forward pass over all rows (runtime sizes its settings by it)."""
    return source.rows * sum(a * b for a, b in zip(widths_, widths_[1:]))


def initial_params(config: cli.Config, widths_: tuple[int, ...]) -> dict[str, np.ndarray]:
    """--init-weights if given (in the run's dtype: converted, saying so once), else every
    weight and bias drawn from a standard normal."""
    from .model import load_params, random_params
    if not config.init_weights:
        return random_params(widths_, config.seed, config.dtype)
    params, stored = load_params(config.init_weights, widths_, config.dtype)
    if stored != config.dtype and launcher.rank() == 0:  # elastic ranks all load it
        outputs.warn(f"--init-weights {config.init_weights}: {stored} arrays converted to "
                     f"{config.dtype} (--dtype)")
    return params


def chief(config: cli.Config, widths_: tuple[int, ...], hosts: list[str], steps: int) -> Start:
    """Rank 0's start: the newest valid checkpoint on --resume, else initial_params; its
    outputs opened. Raises JobError on anything the user must fix."""
    params, slots, step = None, None, 0
    if config.resume:
        params, slots, step = _resumed(config, len(hosts), widths_)
    if params is None:
        params = initial_params(config, widths_)
    progress = config.progress == "on" or (
        config.progress == "auto" and len(hosts) == 1 and sys.stdout.isatty())
    reporter = outputs.open_reporter(config.as_dict(), hosts, steps, step, progress)
    return Start(params, slots, step, reporter)


def other(config: cli.Config, widths_: tuple[int, ...]) -> Start:
    """Any other rank's start: placeholders of the right shapes, replaced by rank 0's."""
    from .model import random_params
    return Start(random_params(widths_, config.seed, config.dtype), None, 0, outputs.Reporter())


def checkpoint_dir(config: cli.Config) -> str:
    """Where checkpoints are written and --resume looks."""
    return os.path.join(config.output_dir, "checkpoints")


def _resumed(config: cli.Config, ranks: int, widths_: tuple[int, ...]) -> tuple:
    """(params, slots, step) of the newest valid checkpoint, checked against this run;
    (None, None, 0) when there is none."""
    from .checkpoint import latest_valid
    from .model import check_params
    found = latest_valid(checkpoint_dir(config))
    if found is None:
        outputs.warn("--resume: no valid checkpoint, starting from step 0")
        return None, None, 0
    params, slots, meta = found
    where = f"checkpoint of step {meta['step']}"
    made_in = meta.get("dtype") or params["W1"].dtype.name  # older checkpoints: from W1
    params = check_params(params, widths_, where, config.dtype)
    if meta["optimizer"] != config.optimizer:
        raise JobError(f"{where} was made with --optimizer {meta['optimizer']}, "
                       f"this run uses {config.optimizer}")
    if made_in != config.dtype:  # its slots and its exact resume are of that precision
        raise JobError(f"{where} was made with --dtype {made_in}, this run uses "
                       f"{config.dtype}: resume with --dtype {made_in}")
    if meta["ranks"] != ranks:
        outputs.warn(f"resuming a {meta['ranks']}-rank run on {ranks} ranks: full-batch "
                     "steps are unchanged, mini-batches from here on differ from the original's")
    outputs.say(f"resuming from the {where}")
    return params, slots, meta["step"]
