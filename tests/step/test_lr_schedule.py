"""--lr-schedule and --warmup against Keras' own schedules (an independent implementation):
the rate of each update, in Python (the log) and in the compiled step, equal to 1e-15."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.fast  # in process, no launcher
LR, WARMUP, TOTAL = 0.05, 12, 100


def _keras(kind: str, every: int, rate: float):
    """Keras 3's schedule of the decay after the warm-up, by updates since the warm-up."""
    from keras.optimizers import schedules
    span = TOTAL - WARMUP
    if kind == "cosine":
        return schedules.CosineDecay(LR, span)
    if kind in ("step", "exponential"):
        return schedules.ExponentialDecay(LR, every, rate, staircase=kind == "step")
    return lambda t: LR


@pytest.mark.parametrize("kind", ["constant", "cosine", "step", "exponential"])
def test_each_update_has_keras_rate_after_a_linear_warmup(hvd_single, kind: str) -> None:
    """(hvd_single: TensorFlow's runtime starts as the other in-process tests need it.)"""
    import tensorflow as tf

    from dptrain.step.lr_schedule import LrSchedule
    every, rate = 25, 0.3
    ours = LrSchedule(LR, kind, WARMUP, TOTAL, rate, every)
    theirs = _keras(kind, every, rate)
    for k in range(TOTAL + 1):
        expected = (LR * (k + 1) / WARMUP if k < WARMUP
                    else float(theirs(k - WARMUP)))  # Keras computes in float32: 1e-6, 1e-8 near 0
        compiled = float(ours.tensor(tf.constant(k, tf.int64), tf.float64))
        assert math.isclose(ours.at(k), expected, rel_tol=1e-6, abs_tol=1e-8), (kind, k)
        assert math.isclose(compiled, ours.at(k), rel_tol=1e-15, abs_tol=1e-18), (kind, k)


def test_the_default_period_is_a_third_of_the_updates_after_the_warmup() -> None:
    from dptrain.step.lr_schedule import LrSchedule
    s = LrSchedule(LR, "step", WARMUP, TOTAL, 0.5)
    period = (TOTAL - WARMUP) // 3
    assert s.at(WARMUP + period - 1) == LR and s.at(WARMUP + period) == LR * 0.5
    assert s.at(WARMUP) == LR and s.at(0) == LR / WARMUP  # warm-up starts at lr/W, not 0
