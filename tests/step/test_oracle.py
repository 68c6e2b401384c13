"""The NumPy oracle checks itself against finite differences; TensorFlow's step matches it."""
from __future__ import annotations

import numpy as np
import pytest

import oracle
from trainers import one_process_trainer

pytestmark = pytest.mark.fast  # no launcher: in-process checks


def test_hand_gradient_matches_central_differences() -> None:
    x, y = oracle.seed_data(17)
    p = oracle.draw_params(5, 3)
    g = oracle.gradient(p, x, y)
    eps = 1e-6
    for name, value in p.items():
        for idx in np.ndindex(value.shape):
            hi = {k: v.copy() for k, v in p.items()}
            lo = {k: v.copy() for k, v in p.items()}
            hi[name][idx] += eps
            lo[name][idx] -= eps
            numeric = (oracle.loss(hi, x, y) - oracle.loss(lo, x, y)) / (2 * eps)
            assert numeric == pytest.approx(g[name][idx], rel=1e-6, abs=1e-9), (name, idx)



# (loss rtol, loss atol as a fraction of the first loss, weights rtol, weights atol) per dtype:
# float64 agrees to rounding; float32 runs the oracle in float32 too, and the two differ by
# float32 rounding in other orders (u = 6e-8 a sum term), over 300 steps.
TOLERANCES = {np.float64: (1e-10, 1e-12, 1e-12, 1e-15), np.float32: (2e-5, 1e-6, 1e-5, 1e-7)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: d.__name__)
@pytest.mark.parametrize("xla", [False, True])
@pytest.mark.parametrize("n", [50, 7, 1])
def test_tensorflow_step_matches_oracle(hvd_single, n: int, xla: bool, dtype: type) -> None:
    from dptrain.data.source import Parabola, load_shard

    def trainer(p: dict):
        shard = load_shard(Parabola(n, dtype), 1, 0)
        return one_process_trainer(p, shard.x, shard.y, xla=xla)

    loss_rtol, loss_atol, w_rtol, w_atol = TOLERANCES[dtype]
    p = {k: v.astype(dtype) for k, v in oracle.draw_params(5, n).items()}
    t = trainer(p)
    xo, yo = oracle.seed_data(n, dtype)
    expected = oracle.descend(p, xo, yo, 0.01, 300, 1)
    got = []
    for k in range(300):
        got.append(t.evaluate()[0])
        assert t.advance(k, 1) == 1
    got.append(t.evaluate()[0])
    want = [loss for _, loss in expected]
    # atol: a 1-point fit reaches losses of 1e-30, where only absolute rounding is meaningful.
    np.testing.assert_allclose(got, want, rtol=loss_rtol, atol=loss_atol * want[0])
    g = oracle.gradient(p, xo, yo)
    one = trainer(p)
    one.advance(0, 1)
    for k, v in one.model.params().items():
        assert v.dtype == dtype
        np.testing.assert_allclose(v, p[k] - dtype(0.01) * g[k], rtol=w_rtol, atol=w_atol)
    # 300 updates in one compiled call: the same descent as 300 calls.
    many = trainer(p)
    assert many.advance(0, 300) == 300
    np.testing.assert_allclose(many.evaluate()[0], want[-1], rtol=loss_rtol,
                               atol=loss_atol * want[0])


@pytest.mark.parametrize("xla", [False, True])
def test_non_finite_gradient_stops_before_the_update(hvd_single, xla: bool) -> None:
    """A NaN in the rows makes the combined gradient NaN: no update is applied from there on."""
    p = oracle.draw_params(5, 3)
    x = np.array([[0.5], [np.nan], [1.0]])
    t = one_process_trainer(p, x, x * x, xla=xla)
    assert t.advance(0, 50) == 0
    for k, v in t.model.params().items():
        np.testing.assert_array_equal(v, p[k])


def test_the_loop_logs_saves_and_stops_where_its_plan_says(hvd_single) -> None:
    """sync.run in process: logged steps and losses, save points, and the stop at a NaN."""
    from dptrain.data.source import Parabola, load_shard
    from dptrain.errors import JobError
    from dptrain.step.loop import Hooks, Plan, run

    p = oracle.draw_params(5, 11)
    shard = load_shard(Parabola(50, np.float64), 1, 0)
    t = one_process_trainer(p, shard.x, shard.y)
    model = t.model
    logged, saved = [], []
    last = run(t, Plan(start=0, steps=130, log_every=50, per_call=1000, save_every=40),
               Hooks(lambda k, loss, *_: logged.append((k, loss)), save=saved.append))
    assert [k for k, _ in logged] == [0, 50, 100, 130] and saved == [40, 80, 120]
    want = oracle.descend(p, *oracle.seed_data(50), 0.01, 130, 50)
    np.testing.assert_allclose([v for _, v in logged], [v for _, v in want], rtol=1e-10)
    assert last == logged[-1][1]
    model.weights[0].assign(np.full((1, 5), np.nan))  # from here every loss is NaN
    with pytest.raises(JobError, match="step 131: the combined gradient is not finite"):
        run(t, Plan(130, 200, 50, 1000), Hooks(lambda *a: None))  # no loss before step 150
    with pytest.raises(JobError, match="the loss is nan after step 130"):
        run(t, Plan(130, 200, 10, 1000), Hooks(lambda *a: None))


@pytest.mark.parametrize("xla", [False, True])
def test_accumulated_micro_batches_make_the_whole_batch_step(hvd_single, xla: bool) -> None:
    """--accumulate 4 on 7 rows (micro-batches of 1, 2, 2, 2 rows): the oracle's full-batch
    descent, in float64, with and without XLA."""
    from dptrain.data.source import Parabola, load_shard

    p = oracle.draw_params(5, 21)
    shard = load_shard(Parabola(7, np.float64), 1, 0)
    t = one_process_trainer(p, shard.x, shard.y, xla=xla, accumulate=4)
    assert t.advance(0, 40) == 40
    want = oracle.descend(p, *oracle.seed_data(7), 0.01, 40, 40)[-1][1]
    assert t.evaluate()[0] == pytest.approx(want, rel=1e-12)


def test_cross_entropy_and_hits_match_numpy() -> None:
    """losses.SoftmaxCrossEntropy against log-sum-exp written out in NumPy, float64."""
    import tensorflow as tf

    from dptrain.step.losses import SoftmaxCrossEntropy
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(9, 4)) * 3
    labels = rng.integers(0, 4, size=(9, 1)).astype(np.float64)
    total, hits = SoftmaxCrossEntropy.sums(tf.constant(logits), tf.constant(labels)).numpy()
    top = logits.max(axis=1)
    log_z = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
    picked = logits[np.arange(9), labels[:, 0].astype(int)]
    assert total == pytest.approx(np.sum(log_z - picked), rel=1e-13)
    assert hits == np.sum(np.argmax(logits, axis=1) == labels[:, 0])
    assert SoftmaxCrossEntropy.elements(9, 1) == 9
