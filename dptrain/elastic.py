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

from . import distributed, sync
from .batches import Schedule
from .data import load_shard
from .model import MLP, load_params, random_params
from .optim import Hyper, Optimizer
from .errors import JobError, fail
from .outputs import Reporter, open_reporter, placement, say


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
        hvd.broadcast_variables(self.variables, root_rank=0)
        self.save()


def main(config, widths: tuple[int, ...], work: float) -> None:
    """--elastic: set up without collectives, then train inside Horovod's elastic loop."""
    distributed.start(work)
    params = (load_params(config.init_weights, widths) if config.init_weights
              else random_params(widths, config.seed))  # the same on every rank
    model = MLP(params)
    opt = Optimizer(model.weights, model.names, Hyper(
        config.optimizer, config.lr, config.momentum, config.beta1, config.beta2, config.eps))
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    state = State(model.weights + list(opt.slots.values()) + [step])
    reporter: list[Reporter] = []  # opened by rank 0 at step 0, and only there
    logged = [-1]  # the last step it logged
    steps = config.steps if config.steps is not None else config.epochs  # one batch an epoch

    def commit(k: int) -> None:  # every rank, after each logged (so finite) step
        step.assign(k)
        state.commit()

    @hvd.elastic.run
    def loop(state: State) -> float:
        rank, size, k = hvd.rank(), hvd.size(), int(step.numpy())
        hosts = distributed.hostnames()  # a collective, but inside the loop: all ranks are here
        shard = load_shard(config.data, config.target, config.n_points, size, rank)
        trainer = sync.Trainer(model, opt, shard.x, shard.y, shard.n_total, Schedule(
            shard.n_total, size, rank, len(shard.x), shard.n_total, config.seed, False))
        if rank == 0 and k == 0 and not reporter:
            reporter.append(open_reporter(config.as_dict(), hosts, steps, 0, False))
        elif reporter:
            reporter[0].size = size
            say(f"elastic: {placement(hosts)}, from step {k}")
        def log(k: int, *rest) -> None:  # a restart repeats its first step's log: skip it
            if reporter and k > logged[0]:
                logged[0] = k
                reporter[0].log(k, *rest)

        return sync.run(trainer, k, steps, config.log_every, config.steps_per_call or steps,
                        log, lambda n: None, commit, config.log_every)

    try:
        loop(state)
    except JobError as e:  # a NaN: every rank stops at the same step; rank 0 says why
        fail(str(e), rank=hvd.rank(), code=1)
    if reporter:
        reporter[0].close()
        if config.output_dir:
            from . import plot
            plot.save_results(config.output_dir, model.params())
