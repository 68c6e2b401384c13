"""Asynchronous training: rank 0 is a parameter server, ranks 1..P-1 are workers (mpi4py).

A worker fetches the weights and their version every `fetch_every` of its steps, computes the
gradient of its slice (or of a mini-batch of it) on that copy, adds it up over `push_every`
steps and pushes the sum with the version it was computed on (the oldest, if the sum spans
several). The server applies each push as it arrives, w <- w - lr * g, and bumps the version:
the gradient may be `staleness` = (version at apply - version computed on) updates old. This
is Downpour SGD's scheme (Dean et al. 2012) with plain SGD on the server. After `steps`
applied updates the server answers every worker's next message with STOP; each worker stops
on its first STOP, so the server exits once all have, and no message is left unreceived.

Messages are NumPy buffers (no pickling): FETCH (1 float) -> WEIGHTS [flag, version, w...];
PUSH [g..., version] -> REPLY [flag]. The server holds no training rows: it evaluates the
full-data loss for the log by streaming the data in chunks.
"""
from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np

from dptrain.nets.numpy_net import squared_error

FETCH, PUSH, WEIGHTS, REPLY = 1, 2, 3, 4
GO, STOP = 0.0, 1.0


def flatten(params: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """One vector of every array (in their dtype), in the model's order."""
    return np.concatenate([params[k].ravel() for k in names])


def unflatten(vector: np.ndarray, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    """The inverse of flatten."""
    out, i = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        out[name], i = vector[i:i + size].reshape(shape), i + size
    return out


class Server:
    """Rank 0: holds the weights, applies pushes in arrival order, records staleness."""

    def __init__(self, comm, params: dict, lr: float, steps: int):
        self.comm, self.lr, self.steps = comm, lr, steps
        self.shapes = {k: v.shape for k, v in params.items()}
        self.w = flatten(params, list(params))
        self.version = 0
        self.applied: list[tuple[int, int, int]] = []  # (version at apply, computed on, worker)

    def params(self) -> dict[str, np.ndarray]:
        return unflatten(self.w, self.shapes)

    def serve(self, on_update: Callable[[int], None]) -> None:
        """Answer workers until every one of them has been told to stop."""
        from mpi4py import MPI
        status, running = MPI.Status(), self.comm.Get_size() - 1
        push = np.empty(self.w.size + 1)
        while running:
            self.comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            src, tag = status.Get_source(), status.Get_tag()
            if tag == FETCH:
                self.comm.Recv(np.empty(1), source=src, tag=FETCH)
                flag = STOP if self.version >= self.steps else GO
                self.comm.Send(np.concatenate([[flag, self.version], self.w]), dest=src,
                               tag=WEIGHTS)
            else:
                self.comm.Recv(push, source=src, tag=PUSH)
                if self.version < self.steps:  # pushes after the last update are dropped
                    self.applied.append((self.version, int(push[-1]), src))
                    self.w -= self.lr * push[:-1]
                    self.version += 1
                    on_update(self.version)
                flag = STOP if self.version >= self.steps else GO
                self.comm.Send(np.array([flag]), dest=src, tag=REPLY)
            running -= flag == STOP

    def staleness(self) -> np.ndarray:
        return np.array([a - c for a, c, _ in self.applied], dtype=np.int64)


def worker_loop(comm, gradient: Callable[[np.ndarray, int], np.ndarray], size: int,
                fetch_every: int, push_every: int) -> int:
    """A worker's loop; returns how many gradients it computed."""
    reply, flag = np.empty(size + 2), np.empty(1)
    total, pending, computed_on, w, k = np.zeros(size), 0, -1, None, 0
    while True:
        if w is None or k % fetch_every == 0:
            comm.Send(np.zeros(1), dest=0, tag=FETCH)
            comm.Recv(reply, source=0, tag=WEIGHTS)
            if reply[0] == STOP:
                return k
            version, w = int(reply[1]), reply[2:].copy()
        total += gradient(w, k)
        computed_on = version if pending == 0 else computed_on
        pending, k = pending + 1, k + 1
        if pending == push_every:
            comm.Send(np.concatenate([total, [computed_on]]), dest=0, tag=PUSH)
            comm.Recv(flag, source=0, tag=REPLY)
            if flag[0] == STOP:
                return k
            total[:], pending = 0.0, 0


def full_loss(params: dict, chunks: Iterator[tuple[np.ndarray, np.ndarray]], n: int,
              outputs: int) -> float:
    """MSE over all n rows, streamed chunk by chunk so the server never holds the data."""
    return sum(squared_error(params, x, y) for x, y in chunks) / (n * outputs)


def summary(server: Server, seconds: float, workers: int) -> dict:
    """Counts, rate and staleness of a finished run."""
    s = server.staleness()
    return {"updates": len(s), "seconds": seconds, "updates_per_sec": len(s) / seconds,
            "workers": workers, "staleness_mean": float(s.mean()) if len(s) else 0.0,
            "staleness_max": int(s.max()) if len(s) else 0,
            "staleness_histogram": {int(k): v for k, v in sorted(Counter(s.tolist()).items())}}



def _agree(comm, task: Callable[[], object]) -> object:
    """A rank-local task that may raise JobError; every rank stops if any failed."""
    from mpi4py import MPI

    from dptrain.errors import agree

    def lowest_failed(failed: bool) -> int | None:
        mine = np.array([comm.Get_rank() if failed else comm.Get_size()], np.int64)
        lowest = np.empty(1, np.int64)
        comm.Allreduce(mine, lowest, op=MPI.MIN)
        return None if lowest[0] == comm.Get_size() else int(lowest[0])
    return agree(task, comm.Get_rank(), lowest_failed)


def _hostnames(comm) -> list[str]:
    """Every rank's hostname, in rank order."""
    from dptrain.outputs.report import HOSTNAME_BYTES, hostname_row, hostnames_from
    rows = np.empty((comm.Get_size(), HOSTNAME_BYTES), np.uint8)
    comm.Allgather(hostname_row(), rows)
    return hostnames_from(rows)


def _worker_gradient(config, x: np.ndarray, y: np.ndarray, widths: tuple, workers: int,
                     rank: int) -> Callable[[np.ndarray, int], np.ndarray]:
    """gradient(w, k): the MSE gradient of this worker's batch k at weights w (TensorFlow)."""
    import tensorflow as tf

    from dptrain.nets.builtin import MLP, param_shapes, random_params
    from dptrain.step.batches import Schedule
    shapes = param_shapes(widths)
    size = sum(int(np.prod(s)) for s in shapes.values())
    if len(x) == 0:  # more workers than rows: this one has nothing to contribute
        return lambda w, k: np.zeros(size)
    model = MLP(random_params(widths, 0, x.dtype))  # its values are replaced at every fetch
    batch = -(-config.batch_size // workers) if config.batch_size else len(x)
    sched = Schedule(len(x), 1, 0, len(x), batch, config.seed * 1009 + rank, config.shuffle)
    xs = tf.TensorSpec([None, x.shape[1]], x.dtype)
    ys = tf.TensorSpec([None, y.shape[1]], x.dtype)

    @tf.function(input_signature=[xs, ys], autograph=False)
    def grads(bx: tf.Tensor, by: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(model(bx) - by)) / tf.cast(tf.size(by), by.dtype)
        return tape.gradient(loss, model.weights)

    def gradient(w: np.ndarray, k: int) -> np.ndarray:
        for var, value in zip(model.weights, unflatten(w, shapes).values()):
            var.assign(value.astype(x.dtype))  # messages are float64; the model, the run's
        rows = slice(None) if sched.full_batch else sched.local_rows(k)
        return np.concatenate([g.numpy().ravel() for g in grads(x[rows], y[rows])])
    return gradient


def main(config, source) -> None:
    """--mode async: rank 0 serves and reports, the others work."""
    from dptrain.ranks.runtime import fast_defaults, size_thread_pools
    fast_defaults(math.inf)  # before MPI starts: the server waits in Probe, yielding its core
    from mpi4py import MPI

    from dptrain.data.source import load_shard
    from dptrain.errors import fail
    from dptrain.modes import start
    from dptrain.nets import build
    from dptrain.nets.builtin import Builtin, param_shapes
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        fail("--mode async needs at least 2 ranks (a server and a worker), got 1")
    workers, hosts = size - 1, _hostnames(comm)
    widths = build.widths(config, source)
    # Every fallible step is collective, so a failure on any rank stops all of them at once.
    shard = _agree(comm, lambda: load_shard(source, workers, rank - 1) if rank else None)
    layout = Builtin(widths, config.seed, config.dtype)
    begin = _agree(comm, lambda: None if rank else start.chief(config, layout, hosts,
                                                                 config.steps))
    on_host = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size()  # collective: every rank
    if rank:
        size_thread_pools(on_host)
        gradient = _worker_gradient(config, shard.x, shard.y, widths, workers, rank)
        size_w = sum(int(np.prod(s)) for s in param_shapes(widths).values())
        worker_loop(comm, gradient, size_w, config.fetch_every, config.push_every)
    else:
        _serve_and_report(comm, config, begin.params, begin.reporter, source, workers)


def _serve_and_report(comm, config, params: dict, reporter, source, workers: int) -> None:
    """Rank 0: serve until done, logging the full-data loss and staleness as it goes."""
    import os

    from dptrain.outputs.report import atomic_write, say
    server = Server(comm, params, config.lr, config.steps)
    t0 = last_t = time.perf_counter()
    last_v, n = 0, source.rows

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for a in range(0, n, 1 << 16):
            yield source.read(a, min(n, a + (1 << 16)))

    def log(version: int) -> None:
        nonlocal last_t, last_v
        now, s = time.perf_counter(), server.staleness()
        loss = full_loss(server.params(), chunks(), n, source.outputs)
        extra = {"wall": now - t0, "staleness_mean": float(s.mean()) if len(s) else 0.0,
                 "staleness_max": int(s.max()) if len(s) else 0}
        reporter.log(version, loss, (now - last_t) / (version - last_v) if version > last_v
                     else None, extra)
        last_t, last_v = now, version

    log(0)
    server.serve(lambda v: log(v) if v % config.log_every == 0 or v == config.steps else None)
    reporter.close()
    stats = summary(server, time.perf_counter() - t0, workers)
    say(f"async: {stats['updates']} updates by {workers} worker{'s' * (workers != 1)} in "
        f"{stats['seconds']:.2f} s "
        f"({stats['updates_per_sec']:.0f}/s); staleness mean {stats['staleness_mean']:.2f}, "
        f"max {stats['staleness_max']}, histogram {stats['staleness_histogram']}")
    if config.output_dir:
        from dptrain.outputs import plot
        applied = np.array(server.applied, np.int64).reshape(-1, 3)
        atomic_write(os.path.join(config.output_dir, "updates.npz"), lambda f: np.savez(
            f, applied_at=applied[:, 0], computed_on=applied[:, 1], worker=applied[:, 2]))
        atomic_write(os.path.join(config.output_dir, "async.json"),
                     lambda f: f.write(json.dumps(stats, indent=2).encode()))
        plot.save_results(config.output_dir, server.params())
