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
from typing import Protocol

import numpy as np

from . import cli, launcher, outputs
from .data import Source, class_count, open_source
from .errors import JobError, fail


class Layout(Protocol):
    """A network's parameters as start-up sees them (model.Builtin, user_model.KerasNet)."""

    def fresh(self) -> dict[str, np.ndarray]: ...

    def check(self, arrays: dict, where: str) -> dict[str, np.ndarray]: ...

    def describe(self) -> dict: ...


@dataclass(frozen=True)
class Start:
    """Where a run begins: weights, optimizer slots (on resume), step, and rank 0's reporter."""

    params: dict[str, np.ndarray] | None  # None: take rank 0's
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


def step_cost(config: cli.Config, source: Source) -> int | None:
    """Multiply-adds of one forward pass of the built-in network over all rows (runtime sizes
    its settings by it); None for a --model, which is not built yet."""
    if config.model:
        return None
    widths_ = widths(config, source)
    return source.rows * sum(a * b for a, b in zip(widths_, widths_[1:]))


def outputs_of(config: cli.Config, source: Source) -> int:
    """Output columns the network needs: the targets' width, or the class count (largest class
    index + 1) for --loss crossentropy; a JobError for targets that are not class indices."""
    return class_count(source) if config.loss == "crossentropy" else source.outputs


def network(config: cli.Config, source: Source) -> tuple[Layout, object]:
    """(layout, net): the built-in network or --model's, built in the run's dtype. Every rank
    builds the same; the layout is what start-up draws, loads and checks."""
    n_outputs = outputs_of(config, source)
    if config.model:
        from .user_model import build
        net = build(config.model, source.input_shape, n_outputs, config.dtype, config.seed)
        return net, net
    from .model import MLP, Builtin
    layout = Builtin((source.inputs, *config.hidden, n_outputs), config.seed, config.dtype)
    return layout, MLP(layout.fresh())


def initial_params(config: cli.Config, layout: Layout) -> dict[str, np.ndarray]:
    """--init-weights if given (in the run's dtype: converted, saying so once), else the
    layout's fresh draw."""
    if not config.init_weights:
        return layout.fresh()
    from .model import load_params
    params, stored = load_params(config.init_weights, layout.check)
    if stored != config.dtype and launcher.rank() == 0:  # elastic ranks all load it
        outputs.warn(f"--init-weights {config.init_weights}: {stored} arrays converted to "
                     f"{config.dtype} (--dtype)")
    return params


def chief(config: cli.Config, layout: Layout, hosts: list[str], steps: int) -> Start:
    """Rank 0's start: the newest valid checkpoint on --resume, else initial_params; its
    outputs opened. Raises JobError on anything the user must fix."""
    params, slots, step = None, None, 0
    if config.resume:
        params, slots, step = _resumed(config, len(hosts), layout)
    if params is None:
        params = initial_params(config, layout)
    progress = config.progress == "on" or (
        config.progress == "auto" and len(hosts) == 1 and sys.stdout.isatty())
    reporter = outputs.open_reporter(config.as_dict(), hosts, steps, step, progress)
    return Start(params, slots, step, reporter)


def other() -> Start:
    """Any other rank's start: nothing of its own; it takes rank 0's by broadcast."""
    return Start(None, None, 0, outputs.Reporter())


def checkpoint_dir(config: cli.Config) -> str:
    """Where checkpoints are written and --resume looks."""
    return os.path.join(config.output_dir, "checkpoints")


def _resumed(config: cli.Config, ranks: int, layout: Layout) -> tuple:
    """(params, slots, step) of the newest valid checkpoint, checked against this run;
    (None, None, 0) when there is none."""
    from .checkpoint import latest_valid
    found = latest_valid(checkpoint_dir(config))
    if found is None:
        outputs.warn("--resume: no valid checkpoint, starting from step 0")
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
        outputs.warn(f"resuming a {meta['ranks']}-rank run on {ranks} ranks: full-batch "
                     "steps are unchanged, mini-batches from here on differ from the original's")
    outputs.say(f"resuming from the {where}")
    return params, slots, meta["step"]
