"""The run's network: the built-in one or --model's, its widths and cost, its first weights.

Every rank builds the same network; `Layout` is what start-up draws, loads and checks.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from dptrain import cli
from dptrain.data.source import Source, class_count
from dptrain.outputs import report
from dptrain.ranks import launcher


class Layout(Protocol):
    """A network's parameters as start-up sees them (builtin.Builtin, keras_model.KerasNet)."""

    def fresh(self) -> dict[str, np.ndarray]: ...

    def check(self, arrays: dict, where: str) -> dict[str, np.ndarray]: ...

    def describe(self) -> dict: ...


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
        from dptrain.nets.keras_model import build
        net = build(config.model, source.input_shape, n_outputs, config.dtype, config.seed)
        return net, net
    from dptrain.nets.builtin import MLP, Builtin
    layout = Builtin((source.inputs, *config.hidden, n_outputs), config.seed, config.dtype)
    return layout, MLP(layout.fresh())


def initial_params(config: cli.Config, layout: Layout) -> dict[str, np.ndarray]:
    """--init-weights if given (in the run's dtype: converted, saying so once), else the
    layout's fresh draw."""
    if not config.init_weights:
        return layout.fresh()
    from dptrain.nets.builtin import load_params
    params, stored = load_params(config.init_weights, layout.check)
    if stored != config.dtype and launcher.rank() == 0:  # elastic ranks all load it
        report.warn(f"--init-weights {config.init_weights}: {stored} arrays converted to "
                    f"{config.dtype} (--dtype)")
    return params
