"""The synchronous job: start Horovod, load this rank's slice, agree on a start, train, finish.

examples/synchronous.py is the same job in one file, without flags, files or fault handling.
"""
from __future__ import annotations

import os

import horovod.tensorflow as hvd
import tensorflow as tf

from . import cli, distributed, losses, outputs, runtime, startup, sync
from .batches import Schedule
from .data import Source, load_shard
from .errors import JobError, fail
from .optim import Hyper, Optimizer


def main(config: cli.Config, source: Source) -> None:
    """Train config's job on source's rows, every rank one slice of them."""
    cost = startup.step_cost(config, source)
    world = distributed.start(cost)  # Horovod: init, thread pools, one GPU per local rank
    hosts = distributed.hostnames()
    shard = distributed.agree(world, lambda: load_shard(source, world.size, world.rank))
    schedule = Schedule(shard.n_total, world.size, world.rank, len(shard.x),
                        config.batch_size or shard.n_total, config.seed, config.shuffle)
    steps = config.total_steps(schedule.steps_per_epoch)
    layout, model = distributed.agree(world, lambda: startup.network(config, source))
    begin = distributed.agree(world, lambda: (  # the one place that gates rank-0 work
        startup.chief(config, layout, hosts, steps) if world.is_chief else startup.other()))

    opt = Optimizer(model.weights, model.names, Hyper.of(config))
    if begin.params is not None:
        model.assign(begin.params)
    if begin.slots:
        opt.load(begin.slots)
    # Horovod: every rank starts from rank 0's weights and optimizer slots, whatever it drew.
    hvd.broadcast_variables(model.weights + list(opt.slots.values()), root_rank=0)
    # Horovod: and from rank 0's step (a resumed run's), so all stop at the same one.
    first_step = int(hvd.broadcast(tf.constant(begin.step, tf.int64), root_rank=0,
                                   name="dptrain.start").numpy())

    # The built-in network takes each row flat (an empty shard too); a --model its shape.
    x = shard.x if config.model else shard.x.reshape(len(shard.x), source.inputs)
    options = sync.StepOptions(losses.named(config.loss), runtime.use_xla(config.xla, cost),
                               config.accumulate, config.compression)
    trainer = sync.Trainer(model, opt, x, shard.y, shard.n_total, schedule, options)
    per_call = (config.steps_per_call or steps) if schedule.full_batch else 1
    plan = sync.Plan(first_step, steps, config.log_every, per_call, config.checkpoint_every)
    reporter = begin.reporter
    hooks = sync.Hooks(reporter.log, reporter.tick,
                       _checkpointer(config, world, layout, model, opt) if world.is_chief
                       else None)
    try:
        sync.run(trainer, plan, hooks)
    except JobError as e:  # every rank stops at the same step; rank 0 says why
        reporter.close()
        fail(str(e), rank=world.rank, code=1)
    reporter.close()
    _finish(config, world, model, opt)


def _checkpointer(config: cli.Config, world: distributed.World, layout: startup.Layout,
                  model, opt: Optimizer):
    """Rank 0's save(step): a checkpoint of the weights, optimizer slots and this run's shape."""
    from . import checkpoint

    def save(step: int) -> None:
        meta = {"config": config.as_dict(), "ranks": world.size, "optimizer": config.optimizer,
                "dtype": config.dtype} | layout.describe()
        checkpoint.save(startup.checkpoint_dir(config), step, model.params(), opt.state(), meta,
                        config.keep_checkpoints)
    return save


def _finish(config: cli.Config, world: distributed.World, model, opt: Optimizer) -> None:
    """Final weights and figure (rank 0); per-rank state dumps when asked for."""
    if config.dump_rank_state:
        os.makedirs(config.dump_rank_state, exist_ok=True)
        outputs.save_weights(os.path.join(config.dump_rank_state, f"rank-{world.rank}.npz"),
                             model.params() | {f"slot.{k}": v for k, v in opt.state().items()})
    if world.is_chief and config.output_dir:
        from . import plot
        plot.save_results(config.output_dir, model.params())
