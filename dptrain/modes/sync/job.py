"""The synchronous job: start Horovod, load this rank's slice, agree on a start, train, finish.

examples/synchronous.py is the same job in one file, without flags, files or fault handling.
"""
from __future__ import annotations

import os

import horovod.tensorflow as hvd
import tensorflow as tf

from dptrain import cli
from dptrain.data.source import Source, load_shard
from dptrain.errors import JobError, fail
from dptrain.modes import start
from dptrain.nets import build
from dptrain.outputs import report
from dptrain.ranks import distributed, runtime
from dptrain.resume import flow, preempt
from dptrain.step import loop, losses
from dptrain.step.batches import Schedule
from dptrain.step.early_stop import EarlyStop
from dptrain.step.optim import Hyper, Optimizer


def main(config: cli.Config, source: Source, held_out: Source | None = None) -> None:
    """Train config's job on source's rows, every rank one slice of them (and of held_out's,
    --val-data's, to validate on)."""
    cost = build.step_cost(config, source)
    world = distributed.start(cost)  # Horovod: init, thread pools, one GPU per local rank
    hosts = distributed.hostnames()
    shard = distributed.agree(world, lambda: load_shard(source, world.size, world.rank))
    val = held_out and distributed.agree(world, lambda: load_shard(held_out, world.size,
                                                                   world.rank))
    schedule = Schedule(shard.n_total, world.size, world.rank, len(shard.x),
                        config.batch_size or shard.n_total, config.seed, config.shuffle)
    steps = config.total_steps(schedule.steps_per_epoch)
    if config.warmup > steps:  # with --epochs the run's length is known only now
        fail(f"--warmup {config.warmup} is longer than the run ({steps} steps)")
    layout, model = distributed.agree(world, lambda: build.network(config, source))
    begin = distributed.agree(world, lambda: (  # the one place that gates rank-0 work
        start.chief(config, layout, hosts, steps) if world.is_chief else start.other()))
    opt, first_step = _same_start(model, begin, Hyper.of(config, steps))

    options = loop.StepOptions(losses.named(config.loss), runtime.use_xla(config.xla, cost),
                               config.accumulate, config.compression)
    trainer = loop.Trainer(model, opt, _rows(config, shard.x, source), shard.y, shard.n_total,
                           schedule, options, val and (_rows(config, val.x, source), val.y,
                                                       val.n_total))
    per_call = (config.steps_per_call or steps) if schedule.full_batch else 1
    val_every = (config.val_every or (config.log_every if schedule.full_batch
                                      else schedule.steps_per_epoch)) if val else 0
    plan = loop.Plan(first_step, steps, config.log_every, per_call, config.checkpoint_every,
                     val_every)
    early = EarlyStop(config.early_stop, model.params) if config.early_stop else None
    save = (flow.checkpointer(config, world.size, layout, model, opt) if world.is_chief
            else None)
    _train(config, world, trainer, plan, begin.reporter, save, early)
    if early and early.best is not None:
        _keep_best(early, model, world)
    _finish(config, world, model, opt)


def _same_start(model, begin: start.Start, hyper: Hyper) -> tuple[Optimizer, int]:
    """(optimizer, first step): rank 0's start on every rank."""
    opt = Optimizer(model.weights, model.names, hyper)
    if begin.params is not None:
        model.assign(begin.params)
    if begin.slots:
        opt.load(begin.slots)
    # Horovod: every rank starts from rank 0's weights and optimizer slots, whatever it drew.
    hvd.broadcast_variables(model.weights + list(opt.slots.values()), root_rank=0)
    # Horovod: and from rank 0's step (a resumed run's), so all stop at the same one.
    first_step = int(hvd.broadcast(tf.constant(begin.step, tf.int64), root_rank=0,
                                   name="dptrain.start").numpy())
    return opt, first_step


def _rows(config: cli.Config, x, source: Source):
    """The built-in network takes each row flat (an empty shard too); a --model its shape."""
    return x if config.model else x.reshape(len(x), source.inputs)


def _train(config: cli.Config, world: distributed.World, trainer: loop.Trainer,
           plan: loop.Plan, reporter: report.Reporter, save, early) -> None:
    """The loop, and what ends it: a stop signal, an error, the last step or an early stop."""
    # Horovod: at each logged step the ranks agree whether any of them got a stop signal.
    stop = ((lambda: distributed.any_rank(preempt.received() is not None))
            if config.checkpoint_on_signal else None)
    try:
        loop.run(trainer, plan, loop.Hooks(reporter.log, reporter.tick, save, stop, early))
    except loop.Stopped as s:
        reporter.close()
        flow.stopped(config, world.is_chief, save, s.step, s.saved, plan.steps)
    except JobError as e:  # every rank stops at the same step; rank 0 says why
        reporter.close()
        fail(str(e), rank=world.rank, code=1)
    reporter.close()


def _keep_best(early: EarlyStop, model, world: distributed.World) -> None:
    """--early-stop: the weights of the lowest held-out loss are the run's result."""
    model.assign(early.best)
    if world.is_chief:
        ended = (f"stopped early after step {early.stopped_at}" if early.stopped_at is not None
                 else "finished")
        report.say(f"early stop: {ended}; the held-out loss was lowest "
                   f"({early.best_loss:.6e}) after step {early.best_step}, whose weights are "
                   "kept")


def _finish(config: cli.Config, world: distributed.World, model, opt: Optimizer) -> None:
    """Final weights and figure (rank 0); per-rank state dumps when asked for."""
    if config.dump_rank_state:
        os.makedirs(config.dump_rank_state, exist_ok=True)
        report.save_weights(os.path.join(config.dump_rank_state, f"rank-{world.rank}.npz"),
                            model.params() | {f"slot.{k}": v for k, v in opt.state().items()})
    if world.is_chief and config.output_dir:
        from dptrain.outputs import plot
        plot.save_results(config.output_dir, model.params())
        if config.model:  # what keras.models.load_model reads, weights and architecture
            report.save_keras_model(os.path.join(config.output_dir, "model.keras"), model.model)
