"""Block-by-block sums over rows (dptrain/step/row_blocks.py) equal the whole batch's: against the
NumPy oracle's hand-derived gradient, and against TensorFlow's autodiff over all rows at once."""
from __future__ import annotations

import numpy as np
import pytest

import oracle
from trainers import one_process_trainer

pytestmark = pytest.mark.fast  # no launcher: in-process checks


def _mse_and_gradient(weights: list, scale: float):
    """fn(x, y) -> [scale * sum of squared errors, its gradient by weight], by autodiff."""
    import tensorflow as tf

    def fn(x, y):
        with tf.GradientTape() as tape:
            h = tf.tanh(x @ weights[0] + weights[1])
            share = tf.reduce_sum(tf.square(h @ weights[2] + weights[3] - y)) * scale
        return [share, *tape.gradient(share, weights)]
    return fn


@pytest.mark.parametrize("xla", [False, True])
@pytest.mark.parametrize("block", [1, 3, 7, 49, 50, 64])
def test_block_sums_equal_the_oracle(hvd_single, block: int, xla: bool) -> None:
    """50 rows in blocks of `block` (full blocks and a shorter last one, or none): the loss and
    gradient are the oracle's, float64, to 1e-12."""
    import tensorflow as tf

    from dptrain.step import row_blocks
    p = oracle.draw_params(5, 8)
    x, y = oracle.seed_data(50)
    weights = [tf.Variable(p[k]) for k in ("W1", "b1", "W2", "b2")]
    fn = _mse_and_gradient(weights, 1 / 50)
    summed = tf.function(lambda xs, ys: row_blocks.summed(fn, xs, ys, block), jit_compile=xla)
    share, *grads = [t.numpy() for t in summed(tf.constant(x), tf.constant(y))]
    want = oracle.gradient(p, x, y)
    assert share == pytest.approx(oracle.loss(p, x, y), rel=1e-12)
    for name, g in zip(("W1", "b1", "W2", "b2"), grads):
        np.testing.assert_allclose(g, want[name], rtol=1e-12, atol=1e-15)


# Two full blocks of row_blocks.BLOCK (4096) rows and a shorter last one: the trainer's loop
# runs. float32 against the float64 oracle: the gradient's own float32 rounding.
TOLERANCES = {np.float64: 1e-12, np.float32: 1e-5}


@pytest.mark.parametrize("accumulate", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: d.__name__)
def test_blocked_step_equals_the_oracle_and_autodiff(hvd_single, dtype: type,
                                                     accumulate: int) -> None:
    """Under XLA the trainer sums 8229 rows block by block: its step and logged loss are the
    oracle's (float64 1e-12, float32 1e-5) and those of autodiff over all rows at once."""
    from dptrain.step import row_blocks
    n = 2 * row_blocks.BLOCK + 37
    p = {k: v.astype(dtype) for k, v in oracle.draw_params(5, 13).items()}
    x, y = oracle.seed_data(n, dtype)
    blocked = one_process_trainer(p, x, y, xla=True, accumulate=accumulate)
    whole = one_process_trainer(p, x, y, xla=False)
    p64, x64, y64 = ({k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64),
                     y.astype(np.float64))
    rtol = TOLERANCES[dtype]
    assert blocked.evaluate()[0] == pytest.approx(oracle.loss(p64, x64, y64), rel=rtol)
    assert blocked.advance(0, 1) == 1 and whole.advance(0, 1) == 1
    g = oracle.gradient(p64, x64, y64)
    for k, v in blocked.model.params().items():
        assert v.dtype == dtype
        want = p64[k] - 0.01 * g[k]
        np.testing.assert_allclose(v, want, rtol=rtol, atol=rtol * 1e-3)
        np.testing.assert_allclose(v, whole.model.params()[k], rtol=rtol, atol=rtol * 1e-3)


def test_blocked_cross_entropy_counts_every_hit(hvd_single) -> None:
    """A 3-class network over 4101 rows: the blocked loss and hit count are the whole batch's
    (the hits exactly)."""
    from dptrain.nets.builtin import random_params
    from dptrain.step.losses import SoftmaxCrossEntropy
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4101, 4))
    y = rng.integers(0, 3, size=(4101, 1)).astype(np.float64)
    p = random_params((4, 6, 3), 1, np.float64)
    sums = []
    for xla in (True, False):
        t = one_process_trainer(p, x, y, loss=SoftmaxCrossEntropy, xla=xla)
        sums.append(t.evaluate())
    (blocked, scores), (whole, whole_scores) = sums
    assert blocked == pytest.approx(whole, rel=1e-12)
    assert scores["accuracy"] == whole_scores["accuracy"] and 0 < scores["accuracy"] < 1
