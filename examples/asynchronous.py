"""The contrast: the seed job trained asynchronously through a parameter server (mpi4py).

    mpirun -np 3 python examples/asynchronous.py    # rank 0 serves, ranks 1 and 2 work
    mpirun -np 3 python examples/asynchronous.py updates.npz  # and save who pushed what

Rank 0 holds the weights; each worker holds its slice of the 50 points. A worker fetches the
current weights, computes its slice's gradient on them and pushes it; the server applies every
push as it arrives, w <- w - lr * g, 2000 times in all. While one worker computes, others'
pushes land, so its gradient is applied to newer weights than it was computed on: it is stale.
Compare examples/synchronous.py, where every update is the full-data gradient of the current
weights. With one worker (-np 2) this is plain gradient descent again. The server ends with
how many updates each worker made and how stale they were; given a file name, it also saves,
per update, the worker and the version of the weights its gradient was computed on.
"""
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter off

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mpi4py import MPI  # noqa: E402

N, HIDDEN, LR, STEPS, LOG_EVERY, SEED = 50, 5, 0.01, 2000, 50, 0
FETCH, WEIGHTS, PUSH = 1, 2, 3  # message tags
SHAPES = [(1, HIDDEN), (1, HIDDEN), (HIDDEN, 1), (1, 1)]
SIZE = sum(a * b for a, b in SHAPES)


def the_data(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [start, stop) of x = linspace(-2, 2, N), y = x^2, as float32 columns."""
    x = np.linspace(-2.0, 2.0, N)[start:stop].reshape(-1, 1)
    return x.astype(np.float32), (x * x).astype(np.float32)


def my_rows(worker: int, workers: int) -> tuple[int, int]:
    """This worker's contiguous block of the N rows; the first N % workers get one more."""
    base, extra = divmod(N, workers)
    start = worker * base + min(worker, extra)
    return start, start + base + (worker < extra)


def unflatten(w: np.ndarray) -> list[np.ndarray]:
    """The flat weight vector as W1, b1, W2, b2."""
    sizes = np.cumsum([a * b for a, b in SHAPES])[:-1]
    return [part.reshape(s) for part, s in zip(np.split(w, sizes), SHAPES)]


def predict(weights: list, x: tf.Tensor) -> tf.Tensor:
    """tanh(x W1 + b1) W2 + b2."""
    w1, b1, w2, b2 = weights
    return tf.tanh(x @ w1 + b1) @ w2 + b2


def log(step: int, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """The mean squared error of weights w over all N points."""
    loss = np.mean(np.square(predict(unflatten(w), x).numpy() - y))
    print(f"step {step} loss {loss:.6e}", flush=True)


def serve(comm: MPI.Comm) -> None:
    """Rank 0: answer fetches with the weights, apply pushes as they come, STEPS in all."""
    rng = np.random.default_rng(SEED)  # the same draw as the other examples
    w = np.concatenate([rng.standard_normal(s).astype(np.float32).ravel() for s in SHAPES])
    x, y = the_data(0, N)  # only to log the full-data loss
    version, stopped, status = 0, 0, MPI.Status()
    grad = np.empty(SIZE, np.float32)
    fetched_at, worker, computed_on = {}, [], []  # which weights each push was computed on
    while stopped < comm.Get_size() - 1:
        comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        src = status.Get_source()
        if status.Get_tag() == FETCH:
            comm.Recv(np.empty(0, np.float32), source=src, tag=FETCH)
            done = version >= STEPS  # an empty reply tells the worker to stop
            comm.Send(w[:0] if done else w, dest=src, tag=WEIGHTS)
            stopped += done
            fetched_at[src] = version
            continue
        comm.Recv(grad, source=src, tag=PUSH)
        if version < STEPS:  # pushes after the last update are dropped
            if version % LOG_EVERY == 0:  # the loss after `version` updates
                log(version, w, x, y)
            w -= LR * grad
            worker.append(src)
            computed_on.append(fetched_at[src])
            version += 1
    log(version, w, x, y)
    report(np.array(worker), np.array(computed_on))


def report(worker: np.ndarray, computed_on: np.ndarray) -> None:
    """Updates per worker and staleness (updates landed between fetch and apply); save both."""
    staleness = np.arange(len(worker)) - computed_on
    counts = {int(k): int(v) for k, v in zip(*np.unique(worker, return_counts=True))}
    print(f"updates per worker {counts}; staleness mean {staleness.mean():.2f}, "
          f"max {staleness.max()}", flush=True)
    if len(sys.argv) > 1:
        np.savez(sys.argv[1], worker=worker, computed_on=computed_on)


def work(comm: MPI.Comm) -> None:
    """Ranks 1..P-1: fetch, compute this slice's share of the gradient, push; until told."""
    workers = comm.Get_size() - 1
    x, y = the_data(*my_rows(comm.Get_rank() - 1, workers))
    weights = [tf.Variable(np.zeros(s, np.float32)) for s in SHAPES]
    w = np.empty(SIZE, np.float32)

    @tf.function
    def gradient() -> list[tf.Tensor]:
        """The MSE gradient of this worker's rows alone, at the fetched weights."""
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(predict(weights, x) - y))
        return tape.gradient(loss, weights)

    while True:
        comm.Send(np.empty(0, np.float32), dest=0, tag=FETCH)
        status = MPI.Status()
        comm.Recv(w, source=0, tag=WEIGHTS, status=status)
        if status.Get_count(MPI.FLOAT) == 0:
            return
        for var, value in zip(weights, unflatten(w)):
            var.assign(value)
        comm.Send(np.concatenate([g.numpy().ravel() for g in gradient()]), dest=0, tag=PUSH)


def main() -> None:
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        raise SystemExit("asynchronous.py needs at least 2 ranks: mpirun -np 3 ...")
    try:
        serve(comm) if comm.Get_rank() == 0 else work(comm)
    except BaseException:  # a failed rank ends all of them: the others would wait forever
        traceback.print_exc()
        comm.Abort(1)


if __name__ == "__main__":
    main()
