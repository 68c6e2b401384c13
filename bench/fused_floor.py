"""The floor of a large-job step: one fused pass over x and y that computes the loss and all 16
gradients of the seed network (1 -> 5 tanh -> 1), compiled by numba, on every core.

Each row is read once and nothing is written per row: 5 tanh and about 40 flops, summed in
block-local accumulators that the compiler keeps in vector registers. For float32, tanh is
the same rational approximation XLA and Eigen use for float32 (error a few ulp), so that the
loop vectorises; float64 calls the C library's tanh, as XLA does for float64. No framework, no
collective, no second pass: what one full-batch step costs on this machine at best. Same
problem, flags and result file as the other competitors of bench/compare.py; the gradient is
checked against the tests' NumPy oracle before timing.
"""
from __future__ import annotations

import os
import sys

import numba
import numpy as np

import common

BLOCK = 4096  # rows per block: its 17 partial sums stay in registers, then go to float64
C = 7.90531110763549805  # tanh(C) rounds to 1 in float32: clamp there, as Eigen does


@numba.njit(fastmath=True, error_model="numpy", inline="always")
def tanh32(x):
    """Eigen's rational float32 tanh (XLA's on CPU): odd 13th-degree numerator over even
    6th-degree denominator, branch-free so that the loop vectorises."""
    x = min(max(x, np.float32(-C)), np.float32(C))
    z = x * x
    p = z * np.float32(-2.76076847742355e-16) + np.float32(2.00018790482477e-13)
    p = z * p + np.float32(-8.60467152213735e-11)
    p = z * p + np.float32(5.12229709037114e-08)
    p = z * p + np.float32(1.48572235717979e-05)
    p = z * p + np.float32(6.37261928875436e-04)
    p = z * p + np.float32(4.89352455891786e-03)
    q = z * np.float32(1.19825839466702e-06) + np.float32(1.18534705686654e-04)
    q = z * q + np.float32(2.26843463243900e-03)
    q = z * q + np.float32(4.89352518554385e-03)
    return x * p / q


@numba.njit(fastmath=True, inline="always")
def tanh64(x):
    return np.tanh(x)


def kernel(tanh):
    """sums(x, y, w1, b1, w2, b2) -> [squared errors, dW1 (5), db1 (5), dW2 (5), db2],
    unscaled, summed over all rows on numba's threads."""
    @numba.njit(fastmath=True, error_model="numpy")
    def block(x, y, w1, b1, w2, b2, lo, hi, out):
        # The weights as scalars before the loop: a load from an array inside it kept LLVM
        # from vectorising the loop at all (measured: scalar code, 5 divss a row).
        u0, u1, u2, u3, u4 = w1[0], w1[1], w1[2], w1[3], w1[4]
        v0, v1, v2, v3, v4 = b1[0], b1[1], b1[2], b1[3], b1[4]
        o0, o1, o2, o3, o4, o5 = w2[0], w2[1], w2[2], w2[3], w2[4], b2[0]
        z = x[lo] * 0  # zero of the rows' dtype: scalar accumulators stay in registers
        e = a0 = a1 = a2 = a3 = a4 = c0 = c1 = c2 = c3 = c4 = g0 = g1 = g2 = g3 = g4 = r_sum = z
        for i in range(lo, hi):
            xi = x[i]
            h0, h1, h2 = tanh(xi * u0 + v0), tanh(xi * u1 + v1), tanh(xi * u2 + v2)
            h3, h4 = tanh(xi * u3 + v3), tanh(xi * u4 + v4)
            r = h0 * o0 + h1 * o1 + h2 * o2 + h3 * o3 + h4 * o4 + o5 - y[i]
            d0, d1 = r * o0 * (1 - h0 * h0), r * o1 * (1 - h1 * h1)
            d2, d3, d4 = r * o2 * (1 - h2 * h2), r * o3 * (1 - h3 * h3), r * o4 * (1 - h4 * h4)
            e += r * r
            r_sum += r
            a0, a1, a2, a3, a4 = a0 + xi * d0, a1 + xi * d1, a2 + xi * d2, a3 + xi * d3, a4 + xi * d4
            c0, c1, c2, c3, c4 = c0 + d0, c1 + d1, c2 + d2, c3 + d3, c4 + d4
            g0, g1, g2, g3, g4 = g0 + h0 * r, g1 + h1 * r, g2 + h2 * r, g3 + h3 * r, g4 + h4 * r
        for k, v in enumerate((e, a0, a1, a2, a3, a4, c0, c1, c2, c3, c4, g0, g1, g2, g3, g4,
                               r_sum)):
            out[k] += v

    @numba.njit(parallel=True)
    def sums(x, y, w1, b1, w2, b2):
        threads = numba.get_num_threads()
        parts = np.zeros((threads, 17))
        per = -(-len(x) // threads)
        for t in numba.prange(threads):
            stop = min(len(x), (t + 1) * per)
            for lo in range(t * per, stop, BLOCK):
                block(x, y, w1, b1, w2, b2, lo, min(stop, lo + BLOCK), parts[t])
        return parts.sum(0)
    return sums


def loss_and_grads(sums, x, y, p: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    """MSE over all rows and its gradients, in W1, b1, W2, b2 order and shapes."""
    w1, b1, w2, b2 = p
    s = sums(x, y, w1.ravel(), b1.ravel(), w2.ravel(), b2.ravel())
    n = len(x)
    shaped = [s[1:6].reshape(1, 5), s[6:11].reshape(1, 5), s[11:16].reshape(5, 1),
              s[16:17].reshape(1, 1)]
    return s[0] / n, [(2.0 / n * g).astype(x.dtype) for g in shaped]


def oracle_error(sums, dtype: str) -> float:
    """Largest relative gradient difference from tests/helpers/oracle.py on 5,000 rows."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tests",
                                    "helpers"))
    import oracle
    p = oracle.draw_params(5, 7)
    x, y = oracle.seed_data(5000)
    want = oracle.gradient(p, x, y)
    _, got = loss_and_grads(sums, x.ravel().astype(dtype), y.ravel().astype(dtype),
                            [p[k].astype(dtype) for k in common.NAMES])
    return max(float(np.max(np.abs(g - want[k]) / np.maximum(np.abs(want[k]), 1e-3)))
               for g, k in zip(got, common.NAMES))


def main() -> None:
    a = common.parse(__doc__)
    numba.set_num_threads(len(os.sched_getaffinity(0)))
    sums = kernel(tanh32 if a.dtype == "float32" else tanh64)
    error, limit = oracle_error(sums, a.dtype), (1e-4 if a.dtype == "float32" else 1e-10)
    if error > limit:
        sys.exit(f"fused_floor: gradient off the oracle by {error:.1e} (limit {limit})")
    p = list(common.init_weights(a.init_weights, a.dtype).values())
    x, y = (v.ravel() for v in common.rows(a.n_points, 0, a.n_points, a.dtype))

    def step() -> None:
        for w, g in zip(p, loss_and_grads(sums, x, y, p)[1]):
            w -= common.LR * g

    times, final = common.timed_loop(step, lambda: loss_and_grads(sums, x, y, p)[0], a.steps,
                                     a.log_every)
    common.write(a.out, 0, {"sec_per_step": times, "final_loss": final, "oracle_error": error})


if __name__ == "__main__":
    main()
