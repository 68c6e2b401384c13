"""Optimizers on plain tf.Variables: sgd, momentum, adam, with their state as named slots.

Written out rather than taken from Keras 3, whose optimizers expect Keras variables; the slots
are ordinary tf.Variables, so Horovod broadcasts them and checkpoints save them like weights.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dptrain.step.lr_schedule import LrSchedule


@dataclass(frozen=True)
class Hyper:
    """Knobs of the optimizers (each uses its own)."""

    kind: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0  # adam: decoupled (AdamW); sgd, momentum: L2
    clip_norm: float | None = None  # of the combined gradient, before the decay is added
    schedule: LrSchedule | None = None  # lr by step (None: `lr` at every step)

    @classmethod
    def of(cls, config, total: int) -> Hyper:
        """The knobs as the command line set them (a cli.Config), for a run of `total`
        updates."""
        schedule = LrSchedule(config.lr, config.lr_schedule, config.warmup, total,
                              config.lr_decay_rate, config.lr_decay_every)
        return cls(config.optimizer, config.lr, config.momentum, config.beta1, config.beta2,
                   config.eps, config.weight_decay, config.clip_norm, schedule)


class Optimizer:
    """Applies gradients to `weights` in place; `slots` is its whole state."""

    def __init__(self, weights: list[tf.Variable], names: list[str], hyper: Hyper):
        self.weights, self.names, self.h = weights, names, hyper
        dtype = weights[0].dtype
        zeros = [tf.Variable(tf.zeros_like(w), trainable=False) for w in weights]
        self.slots: dict[str, tf.Variable] = {}
        if hyper.kind == "momentum":
            self.slots |= {f"velocity.{n}": z for n, z in zip(names, zeros)}
        elif hyper.kind == "adam":
            second = [tf.Variable(tf.zeros_like(w), trainable=False) for w in weights]
            self.slots |= {f"m.{n}": z for n, z in zip(names, zeros)}
            self.slots |= {f"v.{n}": s for n, s in zip(names, second)}
            self.slots["t"] = tf.Variable(tf.zeros([], dtype), trainable=False)
        self._c = {k: tf.constant(getattr(hyper, k), dtype)
                   for k in ("momentum", "beta1", "beta2", "eps", "weight_decay")}
        self.dtype, self.schedule = dtype, hyper.schedule or LrSchedule(hyper.lr)

    def rate(self, step: int) -> float | None:
        """The learning rate of update step + 1, for the log; None where it is --lr always."""
        s = self.schedule
        return s.at(step) if s.kind != "constant" or s.warmup else None

    def apply(self, grads: list[tf.Tensor], step: tf.Tensor) -> None:
        """Update `step` + 1 (call inside the compiled step; step: an int64 tensor)."""
        c, lr = self._c, self.schedule.tensor(step, self.dtype)
        if self.h.clip_norm is not None:  # the combined gradient: every rank clips alike
            grads, _ = tf.clip_by_global_norm(grads, self.h.clip_norm)
        if self.h.weight_decay and self.h.kind != "adam":  # L2: the gradient of wd/2 |w|^2
            grads = [g + c["weight_decay"] * w for g, w in zip(grads, self.weights)]
        if self.h.kind == "sgd":
            for w, g in zip(self.weights, grads):
                w.assign_sub(lr * g)
        elif self.h.kind == "momentum":  # heavy ball, as Keras: v = mu v - lr g; w += v
            for n, w, g in zip(self.names, self.weights, grads):
                v = self.slots[f"velocity.{n}"]
                w.assign_add(v.assign(c["momentum"] * v - lr * g))
        else:
            self._adam(grads, lr)

    def _adam(self, grads: list[tf.Tensor], lr: tf.Tensor) -> None:
        """Adam (Kingma & Ba 2015, Algorithm 1); with weight decay AdamW (Loshchilov & Hutter
        2019): the decay is applied to the weights, scaled by the rate, not fed to m and v."""
        c = self._c
        t = self.slots["t"].assign_add(1.0)
        b1, b2 = c["beta1"], c["beta2"]
        for n, w, g in zip(self.names, self.weights, grads):
            m = self.slots[f"m.{n}"].assign(b1 * self.slots[f"m.{n}"] + (1 - b1) * g)
            v = self.slots[f"v.{n}"].assign(b2 * self.slots[f"v.{n}"] + (1 - b2) * g * g)
            m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            update = m_hat / (tf.sqrt(v_hat) + c["eps"])
            if self.h.weight_decay:
                update += c["weight_decay"] * w
            w.assign_sub(lr * update)

    def state(self) -> dict[str, np.ndarray]:
        """Slot values, for checkpoints and replica checks."""
        return {k: v.numpy() for k, v in self.slots.items()}

    def load(self, state: dict[str, np.ndarray]) -> None:
        """Restore slot values saved by state()."""
        for k, v in self.slots.items():
            v.assign(state[k])
