"""Synchronous data-parallel training of a small tanh network with Horovod (default: 1 -> 5 -> 1
on y = x^2, full-batch gradient descent, lr 0.01, 2000 steps).

Each rank reads only its contiguous slice of the N samples, computes that slice's share of the
gradient, Horovod sums the shares by ring-allreduce, and every rank applies the same update:
full-batch runs equal single-process gradient descent for any N and any number of ranks.

    python train.py                                   # one process
    horovodrun -np 4 python train.py                  # four ranks on this machine
    mpirun -np 4 -bind-to none -map-by slot python train.py
    HOSTFILE=hostfile NP=8 ./launch.sh --steps 5000   # a cluster, through mpirun
    sbatch -N 2 train.sbatch --steps 5000             # a Slurm batch job
    HOSTS_FILE=hosts horovodrun --gloo -np 3 --min-np 2 \
        --host-discovery-script scripts/discover_hosts.sh python train.py --elastic
    python train.py --help                            # every flag and its default
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter off

# These load no TensorFlow; the modules that do are imported once the flags are known good.
from dptrain import cli, outputs  # noqa: E402
from dptrain.errors import JobError, fail, guard  # noqa: E402

if TYPE_CHECKING:
    from dptrain.distributed import World


def start_state(config: cli.Config, world: World, widths: tuple, hosts: list[str],
                steps: int) -> tuple[dict, dict | None, int, outputs.Reporter]:
    """(weights, optimizer slots, step, reporter): rank 0's from a checkpoint, --init-weights
    or the random draw, with its outputs opened; the other ranks' are replaced by broadcast."""
    from dptrain import checkpoint, model

    params, slots, start = model.random_params(widths, config.seed), None, 0
    if not world.is_chief:  # the one place that gates rank-0 work
        return params, slots, start, outputs.Reporter()
    if config.resume:
        found = checkpoint.latest_valid(checkpoint_dir(config))
        if found is None:
            outputs.warn("--resume: no valid checkpoint, starting from step 0")
        else:
            params, slots, start = resumable(found, config, world, widths)
    elif config.init_weights:
        params = model.load_params(config.init_weights, widths)
    progress = config.progress == "on" or (
        config.progress == "auto" and world.size == 1 and sys.stdout.isatty())
    reporter = outputs.open_reporter(config.as_dict(), hosts, steps, start, progress)
    return params, slots, start, reporter


def resumable(found: tuple, config: cli.Config, world: World, widths: tuple) -> tuple:
    """A loaded checkpoint's (params, slots, step), checked against this run."""
    from dptrain.model import check_params

    params, slots, meta = found
    where = f"checkpoint of step {meta['step']}"
    params = check_params(params, widths, where)
    if meta["optimizer"] != config.optimizer:
        raise JobError(f"{where} was made with --optimizer {meta['optimizer']}, "
                       f"this run uses {config.optimizer}")
    if meta["ranks"] != world.size:
        outputs.warn(f"resuming a {meta['ranks']}-rank run on {world.size} ranks: full-batch "
                     "steps are unchanged, mini-batches from here on differ from the original's")
    outputs.say(f"resuming from the {where}")
    return params, slots, meta["step"]


def data_shape(config: cli.Config) -> tuple[int, tuple[int, ...]]:
    """(rows, layer widths) of this run; fails on a missing or malformed --data file (every
    rank reads it anyway) before TensorFlow loads."""
    rows, inputs, outputs_ = config.n_points, 1, 1
    if config.data:
        from dptrain.datafile import DataFile
        try:
            f = DataFile(config.data, config.target)
        except JobError as e:
            fail(str(e))
        rows, inputs, outputs_ = f.rows, f.inputs, f.outputs
    return rows, (inputs, *config.hidden, outputs_)


def checkpoint_dir(config: cli.Config) -> str:
    return os.path.join(config.output_dir, "checkpoints")


def main() -> None:
    config = cli.parse()  # flags are checked before TensorFlow loads: a typo fails at once
    rows, widths = data_shape(config)
    work = rows * sum(a * b for a, b in zip(widths, widths[1:]))  # multiply-adds per pass
    if config.mode == "async":  # the contrasting design: a parameter server over mpi4py
        from dptrain import async_ps
        async_ps.main(config)
    elif config.elastic:  # ranks may leave and join; no collective outside Horovod's loop
        from dptrain import elastic
        elastic.main(config, widths, work)
    else:
        train(config, widths, work)


def train(config: cli.Config, widths: tuple[int, ...], work: int) -> None:
    """The synchronous job: start Horovod, load this rank's slice, agree on a start, train."""
    from dptrain import distributed, runtime, sync
    from dptrain.batches import Schedule
    from dptrain.data import load_shard
    from dptrain.model import MLP
    from dptrain.optim import Hyper, Optimizer

    world = distributed.start(work)  # Horovod: init, thread pools, one GPU per local rank
    hosts = distributed.hostnames()
    shard = distributed.agree(world, lambda: load_shard(  # only this rank's rows
        config.data, config.target, config.n_points, world.size, world.rank))
    schedule = Schedule(shard.n_total, world.size, world.rank, len(shard.x),
                        config.batch_size or shard.n_total, config.seed, config.shuffle)
    steps = config.total_steps(schedule.steps_per_epoch)

    params, slots, start, reporter = distributed.agree(
        world, lambda: start_state(config, world, widths, hosts, steps))
    model = MLP(params)
    opt = Optimizer(model.weights, model.names, Hyper.of(config))
    if slots:
        opt.load(slots)
    # Horovod: every rank starts from rank 0's weights, optimizer slots and step.
    distributed.broadcast_from_chief(model.weights + list(opt.slots.values()))
    start = distributed.broadcast_int(start, "dptrain.start")

    trainer = sync.Trainer(model, opt, shard.x, shard.y, shard.n_total, schedule,
                           xla=runtime.use_xla(config.xla, work))
    per_call = (config.steps_per_call or steps) if schedule.full_batch else 1
    save = checkpointer(config, world, widths, model, opt) if world.is_chief else None
    try:
        sync.run(trainer, start, steps, config.log_every, per_call, reporter.log, reporter.tick,
                 save, config.checkpoint_every)
    except JobError as e:  # every rank stops at the same step; rank 0 says why
        reporter.close()
        fail(str(e), rank=world.rank, code=1)
    reporter.close()
    finish(config, world, model, opt)


def checkpointer(config: cli.Config, world: World, widths: tuple, model, opt):
    """Rank 0's save(step): a checkpoint of the weights, optimizer slots and this run's shape."""
    from dptrain import checkpoint

    def save(step: int) -> None:
        meta = {"config": config.as_dict(), "widths": list(widths), "ranks": world.size,
                "optimizer": config.optimizer}
        checkpoint.save(checkpoint_dir(config), step, model.params(), opt.state(), meta,
                        config.keep_checkpoints)
    return save


def finish(config: cli.Config, world: World, model, opt) -> None:
    """Final weights and figure (rank 0); per-rank state dumps when asked for."""
    if config.dump_rank_state:
        os.makedirs(config.dump_rank_state, exist_ok=True)
        outputs.save_weights(os.path.join(config.dump_rank_state, f"rank-{world.rank}.npz"),
                             model.params() | {f"slot.{k}": v for k, v in opt.state().items()})
    if world.is_chief and config.output_dir:
        from dptrain import plot
        plot.save_results(config.output_dir, model.params())


if __name__ == "__main__":
    guard(main)  # any rank's unexpected error ends the whole job at once, with one line
