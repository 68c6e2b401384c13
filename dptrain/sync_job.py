"""The synchronous job: start Horovod, load this rank's slice, agree on a start, train, finish.

examples/synchronous.py is the same job in one file, without flags, files or fault handling.
"""
from __future__ import annotations

import os
import sys
from typing import NoReturn

import horovod.tensorflow as hvd
import tensorflow as tf

from . import cli, distributed, losses, outputs, preempt, runtime, startup, sync
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
    save = _checkpointer(config, world, layout, model, opt) if world.is_chief else None
    # Horovod: at each logged step the ranks agree whether any of them got a stop signal.
    stop = ((lambda: distributed.any_rank(preempt.received() is not None))
            if config.checkpoint_on_signal else None)
    try:
        sync.run(trainer, plan, sync.Hooks(reporter.log, reporter.tick, save, stop))
    except sync.Stopped as s:
        reporter.close()
        _stopped(config, world, save, s, steps)
    except JobError as e:  # every rank stops at the same step; rank 0 says why
        reporter.close()
        fail(str(e), rank=world.rank, code=1)
    reporter.close()
    _finish(config, world, model, opt)


def _checkpointer(config: cli.Config, world: distributed.World, layout: startup.Layout,
                  model, opt: Optimizer):
    """Rank 0's save(step): a checkpoint of the weights, optimizer slots and this run's shape."""
    from . import checkpoint

    def save(step: int) -> str:
        meta = {"config": config.as_dict(), "ranks": world.size, "optimizer": config.optimizer,
                "dtype": config.dtype} | layout.describe()
        return checkpoint.save(startup.checkpoint_dir(config), step, model.params(),
                               opt.state(), meta, config.keep_checkpoints)
    return save


def _stopped(config: cli.Config, world: distributed.World, save, stop: sync.Stopped,
             steps: int) -> NoReturn:
    """After a stop signal: rank 0 checkpoints the step all stopped after (unless saved
    already) and says so; every rank exits with preempt.EXIT_REQUEUE once it is on disk."""
    if world.is_chief:
        from .checkpoint import path_for
        path = path_for(startup.checkpoint_dir(config), stop.step) if stop.saved else (
            save(stop.step))
        # Also as a file: a launcher that ends the others at the first exit (srun -K) may turn
        # the ranks' common exit status into another one.
        outputs.atomic_write(os.path.join(config.output_dir, preempt.STOPPED),
                             lambda f: f.write(f"{stop.step}\n".encode()))
        outputs.say(f"stopped by {preempt.received() or 'a stop signal to another rank'} "
                    f"after step {stop.step} of {steps}: checkpoint {path}; "
                    "--resume goes on from it")
    # Horovod: no rank leaves before that, since a launcher ends the job at the first exit.
    distributed.any_rank(False)
    sys.stdout.flush()
    sys.exit(preempt.EXIT_REQUEUE)


def _finish(config: cli.Config, world: distributed.World, model, opt: Optimizer) -> None:
    """Final weights and figure (rank 0); per-rank state dumps when asked for."""
    if config.dump_rank_state:
        os.makedirs(config.dump_rank_state, exist_ok=True)
        outputs.save_weights(os.path.join(config.dump_rank_state, f"rank-{world.rank}.npz"),
                             model.params() | {f"slot.{k}": v for k, v in opt.state().items()})
    if world.is_chief and config.output_dir:
        from . import plot
        plot.save_results(config.output_dir, model.params())
