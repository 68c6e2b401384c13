"""Where every mode's run begins: the data source, and rank 0's start (a checkpoint,
--init-weights or the seeded draw) with its outputs opened.

Nothing here is a collective: each mode runs these steps under its own agreement (Horovod's
for sync, mpi4py's for async, none for elastic, whose late ranks run them alone), so that a
rank that fails here stops every rank with one line.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from dptrain import cli
from dptrain.data.source import Source, open_held_out, open_source
from dptrain.errors import JobError, fail
from dptrain.nets.build import Layout, initial_params
from dptrain.outputs import report
from dptrain.resume import flow


@dataclass(frozen=True)
class Start:
    """Where a run begins: weights, optimizer slots (on resume), step, and rank 0's reporter."""

    params: dict[str, np.ndarray] | None  # None: take rank 0's
    slots: dict[str, np.ndarray] | None
    step: int
    reporter: report.Reporter


def data(config: cli.Config) -> Source:
    """The run's data source, opened by every rank before TensorFlow loads; a missing or
    malformed --data file fails every rank alike, so rank 0's one line is the whole report."""
    try:
        return open_source(config.data, config.target, config.n_points, config.dtype)
    except JobError as e:
        fail(str(e))


def held_out(config: cli.Config, source: Source) -> Source | None:
    """--val-data, opened and checked against the training rows by every rank before
    TensorFlow loads (None without it)."""
    if not config.val_data:
        return None
    try:
        return open_held_out(config.val_data, config.target, source,
                             config.loss == "crossentropy")
    except JobError as e:
        fail(str(e))


def chief(config: cli.Config, layout: Layout, hosts: list[str], steps: int) -> Start:
    """Rank 0's start: the newest valid checkpoint on --resume, else initial_params; its
    outputs opened. Raises JobError on anything the user must fix."""
    params, slots, step = None, None, 0
    if config.resume:
        params, slots, step = flow.resumed(config, len(hosts), layout)
    if params is None:
        params = initial_params(config, layout)
    progress = config.progress == "on" or (
        config.progress == "auto" and len(hosts) == 1 and sys.stdout.isatty())
    reporter = report.open_reporter(config.as_dict(), hosts, steps, step, progress)
    return Start(params, slots, step, reporter)


def other() -> Start:
    """Any other rank's start: nothing of its own; it takes rank 0's by broadcast."""
    return Start(None, None, 0, report.Reporter())
