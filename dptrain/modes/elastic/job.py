"""Elastic training: ranks may leave and join mid-run (horovodrun --gloo with host discovery).

On every (re)start of the loop each rank loads only its slice for the current number of
ranks, so the combined gradient is still the exact full-data gradient. The weights, the
optimizer slots and the step live in one Horovod elastic state, committed after every log:
when a rank dies, the others get a HorovodInternalError, roll back to the last commit and go
on with fewer ranks; when the discovery script reports a host again, the next commit raises
HostsUpdatedInterrupt, everybody resets, and the new rank is brought up to date by broadcast.

A rank that joins late runs this same code: so nothing here may be a collective outside the
loop (it would pair with the wrong call of the others), which is why every rank draws or
loads the same start itself, and the reporter belongs to whoever was rank 0 at step 0.
"""
from __future__ import annotations

import horovod.tensorflow as hvd
import tensorflow as tf
from horovod.common.elastic import State as HorovodState

from dptrain.data.source import Source, load_shard
from dptrain.errors import JobError, fail
from dptrain.nets import build
from dptrain.outputs.report import Reporter, open_reporter, placement, say
from dptrain.ranks import distributed, runtime
from dptrain.step import loop
from dptrain.step.batches import Schedule
from dptrain.step.optim import Hyper, Optimizer


class State(HorovodState):
    """Weights, optimizer slots and step as one elastic state, synced by broadcast.

    Not Horovod's TensorFlowState: in eager TF2 it broadcasts at construction (a collective a
    late rank would run alone) and not on sync (a late rank would keep its own values). Only
    tf.Variables are synced, so nothing goes through pickle: the step is a variable too.
    """

    def __init__(self, variables: list[tf.Variable]):
        self.variables = variables
        super().__init__(bcast_object=hvd.broadcast_object, get_rank=hvd.rank)
        self.save()

    def save(self) -> None:
        self._saved = [v.numpy() for v in self.variables]

    def restore(self) -> None:
        for v, value in zip(self.variables, self._saved):
            v.assign(value)

    def sync(self) -> None:
        # Horovod: after every reset, all ranks (a newly joined one too) take rank 0's values.
        hvd.broadcast_variables(self.variables, root_rank=0)
        self.save()


class Run:
    """This process's part of an elastic run: what outlives a reset of the ring."""

    def __init__(self, config, source: Source, model, opt: Optimizer, xla: bool):
        self.config, self.source, self.model, self.opt, self.xla = config, source, model, opt, xla
        self.steps = config.total_steps(1)  # full batch: one step an epoch
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.state = State(model.weights + list(opt.slots.values()) + [self.step])
        self.reporter: Reporter | None = None  # opened by rank 0 at step 0, and only there
        self.logged = -1  # the last step it logged

    def commit(self, k: int) -> None:
        """Every rank, after each logged (so finite) step: this is where a reset rolls back to."""
        self.step.assign(k)
        self.state.commit()

    def log(self, k: int, *rest) -> None:
        """The reporter's log, once per step: a restart repeats its first step's log."""
        if self.reporter and k > self.logged:
            self.logged = k
            self.reporter.log(k, *rest)

    def once(self) -> float:
        """From the last commit to the end on the current ranks, each with its new slice."""
        c, rank, size, k = self.config, hvd.rank(), hvd.size(), int(self.step.numpy())
        hosts = distributed.hostnames()  # a collective, but inside the loop: all ranks are here
        shard = load_shard(self.source, size, rank)
        trainer = loop.Trainer(self.model, self.opt, shard.x, shard.y, shard.n_total, Schedule(
            shard.n_total, size, rank, len(shard.x), shard.n_total, c.seed, False),
            loop.StepOptions(xla=self.xla))
        if rank == 0 and k == 0 and self.reporter is None:
            self.reporter = open_reporter(c.as_dict(), hosts, self.steps, 0, False)
        elif self.reporter:
            self.reporter.size = size
            say(f"elastic: {placement(hosts)}, from step {k}")
        plan = loop.Plan(k, self.steps, c.log_every, c.steps_per_call or self.steps, c.log_every)
        return loop.run(trainer, plan, loop.Hooks(self.log, save=self.commit))


def main(config, source: Source) -> None:
    """--mode elastic: set up without collectives, then train inside Horovod's elastic loop."""
    cost = build.step_cost(config, source)
    distributed.start(cost)  # Horovod: init, thread pools, one GPU per local rank
    try:  # every rank reads the same file or draws the same weights: no broadcast needed
        layout, model = build.network(config, source)
        model.assign(build.initial_params(config, layout))
    except JobError as e:
        fail(str(e))  # every rank fails alike; rank 0 says it
    opt = Optimizer(model.weights, model.names, Hyper.of(config, config.total_steps(1)))
    run = Run(config, source, model, opt, runtime.use_xla(config.xla, cost))
    try:
        # Horovod: run once() until it returns; on a rank's loss or a host change, reset the
        # ring, roll back to the last commit, sync the state, and call it again.
        hvd.elastic.run(lambda state: run.once())(run.state)
    except JobError as e:  # a NaN: every rank stops at the same step; rank 0 says why
        fail(str(e), rank=hvd.rank(), code=1)
    if run.reporter:
        run.reporter.close()
        if config.output_dir:
            from dptrain.outputs import plot
            plot.save_results(config.output_dir, model.params())
