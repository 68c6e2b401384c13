"""The synchronous loop: per-shard gradients, summed by ring-allreduce, one update everywhere."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from dptrain.errors import JobError
from dptrain.step import row_blocks
from dptrain.step.batches import Schedule
from dptrain.step.losses import Loss, MeanSquaredError
from dptrain.step.optim import Optimizer


@dataclass(frozen=True)
class StepOptions:
    """How a step computes and combines its gradient."""

    loss: type[Loss] = MeanSquaredError
    xla: bool = False  # compile each rank's loss and gradient with XLA
    accumulate: int = 1  # micro-batches per rank per update (K backward passes, 1 allreduce)
    compression: str = "none"  # "fp16": gradients travel as float16 in the allreduce


class Trainer:
    """One rank's compiled steps over its own rows, and the full-data loss."""

    def __init__(self, model, opt: Optimizer, x: np.ndarray, y: np.ndarray,
                 n_total: int, schedule: Schedule, options: StepOptions = StepOptions(),
                 held_out: tuple[np.ndarray, np.ndarray, int] | None = None):
        self.model, self.opt, self.schedule, self.options = model, opt, schedule, options
        self.x, self.y, self.n_total = x, y, n_total
        self.tx, self.ty = tf.constant(x), tf.constant(y)  # the full-batch rows, made once
        # --val-data: this rank's held-out rows and the file's row count.
        self.held_out = held_out and (tf.constant(held_out[0]), tf.constant(held_out[1]),
                                      held_out[2])
        # Rows are arguments of unknown count, never per-rank constants: every rank then
        # traces the same graph, so Horovod's allreduce names (taken from the gradient ops)
        # match across ranks. With per-rank shapes a 1-row shard got differently named
        # gradient ops than a 2-row shard, and the ranks waited for each other forever.
        xs = tf.TensorSpec([None, *x.shape[1:]], x.dtype)
        ys = tf.TensorSpec([None, y.shape[1]], x.dtype)
        scalar, count = tf.TensorSpec([], x.dtype), tf.TensorSpec([], tf.int32)
        step = tf.TensorSpec([], tf.int64)
        # Horovod: --compression fp16 casts each gradient to float16 before the allreduce and
        # back after it: half the bytes on the wire, float16's rounding in the sum.
        self._compression = (hvd.Compression.fp16 if options.compression == "fp16"
                             else hvd.Compression.none)
        # The gradient is computed ahead of the tape (see _precomputed_share) when it is
        # compiled by XLA or summed over micro-batches; otherwise the tape computes it.
        # autograph=False: the loops and branches are written as tf.while_loop / tf.cond, and
        # AutoGraph's source rewriting of everything called (Horovod's tape included) cost
        # ~5 s of every rank's start-up.
        ahead = options.xla or options.accumulate > 1
        # Under XLA, sums over the rows of a network whose rows are independent (the built-in
        # one) are taken block by block in one compiled loop (row_blocks: 3x faster on 10^7
        # rows, and no buffers of the rows' size); a --model may have batch statistics.
        blocked = options.xla and getattr(model, "rows_independent", False)
        self._over_rows = row_blocks.summed if blocked else _whole
        self._share = self._precomputed_share if ahead else self._plain_share
        # XLA fuses the element-wise work of a step (runtime.use_xla: long steps gain a third
        # or more, short ones lose). The allreduce stays outside it, in Horovod's hands.
        self._grads = tf.function(self._accumulated, jit_compile=options.xla,
                                  autograph=False) if ahead else None
        self._steps = tf.function(self._updates, input_signature=[xs, ys, scalar, count, step],
                                  autograph=False)
        self._sums = tf.function(self._all_loss_sums, input_signature=[xs, ys],
                                 jit_compile=options.xla, autograph=False)
        # Trace both now, so the first logged step times measure steps, not compilation.
        self._steps.get_concrete_function()
        self._sums.get_concrete_function()

    def _loss_sums(self, xs: tf.Tensor, ys: tf.Tensor, training: bool = False) -> tf.Tensor:
        """[sum of the loss's terms over these rows, and for classification the hits]."""
        return self.options.loss.sums(self.model(xs, training=training), ys)

    def _all_loss_sums(self, xs: tf.Tensor, ys: tf.Tensor) -> tf.Tensor:
        """_loss_sums over these rows (block by block where that is the plan)."""
        return self._over_rows(lambda x, y: [self._loss_sums(x, y)], xs, ys)[0]

    def _plain_share(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        """This shard's loss terms over the *global* batch's term count: the shares sum to
        the batch loss, and so do their gradients."""
        # That is weighting by sample count, exact for uneven or empty shards, where
        # op=Average (equal weight per rank) would be wrong.
        return self._loss_sums(xs, ys, training=True)[0] * scale

    def _accumulated(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor) -> tuple:
        """(share, its gradient by weight), summed over --accumulate contiguous micro-batches
        of these rows: each backward pass holds only its micro-batch's activations."""
        n, k = tf.shape(xs)[0], self.options.accumulate
        share, grads = None, None
        for i in range(k):
            lo, hi = n * i // k, n * (i + 1) // k
            # Micro-batch i starts after i-1's gradient is done, so the graph cannot run the
            # forward passes side by side and hold every micro-batch's activations at once
            # (bench/accumulate_memory.py, K = 4: 0.64 of K = 1's memory without, 0.34 with).
            with tf.control_dependencies(grads or []):
                part, *parts = self._over_rows(lambda x, y: self._share_and_gradient(x, y, scale),
                                               xs[lo:hi], ys[lo:hi])
            if i == 0:
                share, grads = part, parts
            else:
                share, grads = share + part, [g + p for g, p in zip(grads, parts)]
        return share, grads

    def _share_and_gradient(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor) -> list:
        """[_plain_share of these rows, its gradient by weight] (autodiff)."""
        with tf.GradientTape() as tape:
            share = self._plain_share(xs, ys, scale)
        return [share, *tape.gradient(share, self.model.weights,
                                      unconnected_gradients=tf.UnconnectedGradients.ZERO)]

    def _precomputed_share(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        """_plain_share, its gradient computed ahead by _accumulated (XLA-compiled or not)."""
        # A tape around a jit-compiled forward pass alone runs the backward pass outside XLA
        # (0.52 s against 0.43 s a step on 5e6 rows). DistributedGradientTape then allreduces
        # what `gradient` returns: the precomputed gradient, times d(share)/d(share) = 1.
        weights = self.model.weights

        @tf.custom_gradient
        def share(xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor):
            value, grads = self._grads(xs, ys, scale)
            by_variable = {v.ref(): g for v, g in zip(weights, grads)}

            def gradient(upstream: tf.Tensor, variables=None) -> tuple:
                return [None] * 3, [upstream * by_variable[v.ref()] for v in variables]
            return value, gradient
        return share(xs, ys, scale)

    def _update(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor,
                step: tf.Tensor) -> tf.Tensor:
        """Update step + 1 unless the combined gradient is not finite; returns whether it
        was applied."""
        with tf.GradientTape() as tape:
            share = self._share(xs, ys, scale)
        # Horovod: the tape's gradients are allreduced (ring-allreduce) before they are
        # returned: op=Sum of the shares is the global batch's gradient, exactly.
        tape = hvd.DistributedGradientTape(tape, op=hvd.Sum, compression=self._compression)
        grads = tape.gradient(share, self.model.weights)
        # Every rank holds the same combined gradient, so every rank decides alike: a NaN/inf
        # anywhere stops all of them at the same step, with the weights of the step before.
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])

        def apply() -> tf.Tensor:
            self.opt.apply(grads, step)
            return tf.constant(True)
        return tf.cond(finite, apply, lambda: tf.constant(False))

    def _updates(self, xs: tf.Tensor, ys: tf.Tensor, scale: tf.Tensor, count: tf.Tensor,
                 first: tf.Tensor) -> tf.Tensor:
        """Up to `count` updates after update `first` in one call (a compiled loop); returns
        how many were finite."""
        # One call per step costs ~0.1-0.2 ms of Python and dispatch, as much as the seed step
        # itself: a full-batch run does its steps between two logs in one call instead.
        def more(done: tf.Tensor, ok: tf.Tensor) -> tf.Tensor:
            return tf.logical_and(ok, done < count)

        def step(done: tf.Tensor, ok: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            ok = self._update(xs, ys, scale, first + tf.cast(done, tf.int64))
            return done + tf.cast(ok, tf.int32), ok
        done, _ = tf.while_loop(more, step, (tf.constant(0), tf.constant(True)))
        return done

    def advance(self, k: int, count: int) -> int:
        """Updates k+1..k+count (count > 1 only full-batch); returns how many were applied."""
        elements = self.options.loss.elements(self.schedule.global_batch_size(k), self.y.shape[1])
        if self.schedule.full_batch:
            xs, ys = self.tx, self.ty
        else:
            rows = self.schedule.local_rows(k)
            xs, ys = self.x[rows], self.y[rows]
        scale = tf.constant(1.0 / elements, self.tx.dtype)
        return int(self._steps(xs, ys, scale, tf.constant(count, tf.int32),
                               tf.constant(k, tf.int64)).numpy())

    def evaluate(self) -> tuple[float, dict]:
        """Collective: the loss of the current weights over all N samples of all ranks, and
        for classification {"accuracy": the fraction of them classified right}."""
        # Horovod: the sum of every shard's loss terms (and hits), on every rank.
        sums = hvd.allreduce(self._sums(self.tx, self.ty), op=hvd.Sum, name="dptrain.loss")
        sums = sums.numpy().astype(np.float64)
        loss = float(sums[0]) / self.options.loss.elements(self.n_total, self.y.shape[1])
        return loss, ({"accuracy": float(sums[1]) / self.n_total} if self.options.loss.accuracy
                      else {})

    def validate(self) -> dict:
        """Collective: {"val_loss", and for classification "val_accuracy"} of the current
        weights over every rank's held-out rows, in one allreduce."""
        xs, ys, n = self.held_out
        # Horovod: the held-out shards' loss terms (and hits) summed, on every rank alike.
        sums = hvd.allreduce(self._sums(xs, ys), op=hvd.Sum, name="dptrain.val_loss")
        sums = sums.numpy().astype(np.float64)
        scores = {"val_loss": float(sums[0]) / self.options.loss.elements(n, ys.shape[1])}
        return scores | ({"val_accuracy": float(sums[1]) / n} if self.options.loss.accuracy
                         else {})


@dataclass(frozen=True)
class Plan:
    """Which updates a loop runs and when it logs and saves (every rank's, all alike)."""

    start: int  # updates already done
    steps: int  # the last update
    log_every: int  # log the full-data loss after every log_every-th update and the last
    per_call: int  # at most this many updates in one compiled call
    save_every: int = 0  # save after every save_every-th update (0: never)
    val_every: int = 0  # validate (and log) after every val_every-th update and the last


def _whole(fn: Callable[[tf.Tensor, tf.Tensor], list], xs: tf.Tensor, ys: tf.Tensor) -> list:
    """fn of all these rows at once (what row_blocks.summed computes block by block)."""
    return fn(xs, ys)


def _nothing(done: int) -> None:
    pass


@dataclass(frozen=True)
class Hooks:
    """What the loop reports to: log (rank 0's reporter), tick (a progress bar), save (a
    checkpoint, an elastic commit; may be rank 0's alone), stop (a collective every rank
    calls alike: has any rank been asked to stop?)."""

    log: Callable[[int, float, float | None, dict], None]
    tick: Callable[[int], None] = _nothing
    save: Callable[[int], None] | None = None
    stop: Callable[[], bool] | None = None
    early: Callable[[int, float], bool] | None = None  # (step, held-out loss): stop now?


class Stopped(Exception):
    """Every rank stopped after `step` because one was asked to; `saved`: a checkpoint of that
    step has been written already."""

    def __init__(self, step: int, saved: bool):
        super().__init__(f"stopped after step {step}")
        self.step, self.saved = step, saved


def _next_multiple(k: int, every: int) -> int:
    return (k // every + 1) * every if every else math.inf


def run(trainer: Trainer, plan: Plan, hooks: Hooks) -> float:
    """Updates plan.start+1..plan.steps; log the full-data loss, validate and save as the plan
    says; raise JobError at the first non-finite loss (before saving: the newest checkpoint
    stays good) or combined gradient, and Stopped at the first logged step after plan.start
    where hooks.stop says so; end early where hooks.early says so. Returns the last loss."""
    t0 = last_t = time.perf_counter()
    k, last_k = plan.start, plan.start
    while True:
        validating = plan.val_every and (k % plan.val_every == 0 or k == plan.steps)
        logging = k % plan.log_every == 0 or k == plan.steps or validating
        saving = plan.save_every and k > plan.start and k % plan.save_every == 0
        if logging or saving:  # the loss of the weights after k updates (a collective)
            now = time.perf_counter()
            loss, scores = trainer.evaluate()
            if validating:
                scores |= trainer.validate()
            if logging:
                rate = trainer.opt.rate(k)  # the next update's, where a schedule moves it
                hooks.log(k, loss, (now - last_t) / (k - last_k) if k > last_k else None,
                          scores | ({} if rate is None else {"lr": rate}) | {"wall": now - t0})
                last_t, last_k = time.perf_counter(), k  # step times leave the loss out
            if not math.isfinite(loss):
                raise JobError(f"the loss is {loss} after step {k}: stopping")
            if saving and hooks.save:
                hooks.save(k)
            # Past the start only: a stop asked for during start-up still trains up to here.
            if hooks.stop and plan.start < k < plan.steps and hooks.stop():
                raise Stopped(k, bool(saving and hooks.save))
            if validating and hooks.early and hooks.early(k, scores["val_loss"]):
                return loss  # every rank has the same held-out loss: all end here
        if k == plan.steps:
            return loss
        stop = min(plan.steps, k + plan.per_call, _next_multiple(k, plan.log_every),
                   _next_multiple(k, plan.save_every), _next_multiple(k, plan.val_every))
        done = trainer.advance(k, stop - k)
        hooks.tick(done)
        if done < stop - k:
            raise JobError(f"step {k + done + 1}: the combined gradient is not finite "
                           f"(NaN/inf loss); stopping with the weights of step {k + done}")
        k = stop
