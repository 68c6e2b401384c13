"""The floor: the same step in NumPy, gradients summed by one mpi4py Allreduce per step."""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

import common


def main() -> None:
    a = common.parse(__doc__)
    comm = MPI.COMM_WORLD
    rank, size, n = comm.Get_rank(), comm.Get_size(), a.n_points
    W1, b1, W2, b2 = common.init_weights(a.init_weights, a.dtype).values()
    x, y = common.rows(n, *common.bounds(n, size, rank), a.dtype)
    grad = np.empty(W1.size + b1.size + W2.size + b2.size, a.dtype)

    def step() -> None:
        h = np.tanh(x @ W1 + b1)
        d_out = (2.0 / n) * (h @ W2 + b2 - y)  # d(MSE)/d(output) of this rank's rows
        d_h = (d_out @ W2.T) * (1.0 - h * h)
        grad[:] = np.concatenate([(x.T @ d_h).ravel(), d_h.sum(0), (h.T @ d_out).ravel(),
                                  d_out.sum(0)])
        comm.Allreduce(MPI.IN_PLACE, grad)  # the exact full-data gradient on every rank
        i = 0
        for p in (W1, b1, W2, b2):
            p -= common.LR * grad[i:i + p.size].reshape(p.shape)
            i += p.size

    def loss() -> float:
        return comm.allreduce(float(np.sum((np.tanh(x @ W1 + b1) @ W2 + b2 - y) ** 2))) / n

    times, final = common.timed_loop(step, loss, a.steps, a.log_every)
    common.write(a.out, rank, {"sec_per_step": times, "final_loss": final})


if __name__ == "__main__":
    main()
