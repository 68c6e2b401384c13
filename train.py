"""Synchronous data-parallel training of a 1 -> 5 tanh -> 1 network on y = x^2, with Horovod.

Each rank builds only its contiguous slice of the N points, computes that slice's share of the
full-data MSE gradient, Horovod sums the shares by ring-allreduce, and every rank applies the
same update: the run equals single-process gradient descent for any N and any number of ranks.

    python train.py                                   # one process
    horovodrun -np 4 python train.py                  # four ranks on this machine
    mpirun -np 4 -bind-to none -map-by slot python train.py
    HOSTFILE=hostfile NP=8 ./launch.sh --steps 5000   # a cluster, through mpirun
    python train.py --help                            # every flag and its default
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter off

# These load no TensorFlow; the modules that do are imported once the flags are known good.
from dptrain import cli, outputs  # noqa: E402
from dptrain.errors import JobError  # noqa: E402

if TYPE_CHECKING:
    from dptrain.distributed import World


def prepare_on_chief(config: cli.Config, world: World) -> tuple[dict, outputs.Reporter]:
    """Rank 0's fallible start-up I/O; every rank learns together whether it worked."""
    from dptrain import distributed, model

    hosts = distributed.hostnames()  # collective: which rank runs where, for the record
    params = model.random_params(config.hidden, config.seed)  # replaced by rank 0's broadcast
    reporter, error = outputs.Reporter(False, world.size), None
    if world.is_chief:  # the one place that gates rank-0 work
        try:
            if config.init_weights:
                params = model.load_params(config.init_weights, config.hidden)
            reporter = outputs.open_reporter(config.as_dict(), hosts)
        except JobError as e:
            error = str(e)
    distributed.stop_if_any_failed(error, world)  # no rank is left waiting on a failed one
    return params, reporter


def main() -> None:
    config = cli.parse()  # flags are checked before TensorFlow loads: a typo fails at once
    from dptrain import distributed, sync
    from dptrain.data import parabola_shard
    from dptrain.model import MLP

    world = distributed.start()  # Horovod: init, thread pools, one GPU per local rank
    params, reporter = prepare_on_chief(config, world)
    model = MLP(params)
    distributed.broadcast_from_chief(model.trainable_variables)  # Horovod: same start everywhere
    x, y = parabola_shard(config.n_points, world.size, world.rank)  # only this rank's rows
    step, evaluate = sync.make_step(model, x, y, config.n_points, config.lr)
    sync.train(step, evaluate, config.steps, config.log_every, reporter.log)
    reporter.close()
    if world.is_chief and config.output_dir:
        outputs.save_weights(os.path.join(config.output_dir, "weights.npz"), model.params())


if __name__ == "__main__":
    main()
