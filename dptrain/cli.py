"""Command line: flags, their checks, and the resolved configuration."""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass
from typing import NoReturn

from dptrain import config_file, modes
from dptrain.errors import JobError, fail
from dptrain.ranks import launcher

DEFAULT_STEPS = 2000
OPTIMIZERS = ("sgd", "momentum", "adam")  # dptrain/step/optim.py implements them
DTYPES = ("float32", "float64")  # float32 as TensorFlow and the seed program
LR_SCHEDULES = ("constant", "cosine", "step", "exponential")  # dptrain/step/lr_schedule.py
LOSSES = ("mse", "crossentropy")  # dptrain/step/losses.py implements them
COMPRESSIONS = ("none", "fp16")  # Horovod's Compression.none / .fp16


@dataclass(frozen=True)
class Config:
    """Everything a run depends on; written to config.json."""

    n_points: int
    steps: int | None
    epochs: int | None
    batch_size: int | None
    shuffle: bool
    lr: float
    optimizer: str
    momentum: float
    beta1: float
    beta2: float
    eps: float
    lr_schedule: str
    warmup: int
    lr_decay_rate: float
    lr_decay_every: int
    weight_decay: float
    clip_norm: float | None
    hidden: tuple[int, ...]
    model: str | None
    loss: str
    accumulate: int
    compression: str
    dtype: str
    seed: int
    log_every: int
    steps_per_call: int
    xla: str
    data: str | None
    target: str | None
    val_data: str | None
    val_every: int | None
    early_stop: int | None
    init_weights: str | None
    metrics: str | None
    output_dir: str | None
    checkpoint_every: int
    keep_checkpoints: int
    resume: bool
    checkpoint_on_signal: bool
    dump_rank_state: str | None
    progress: str
    mode: str
    fetch_every: int
    push_every: int
    check: bool

    def as_dict(self) -> dict:
        """JSON-ready view."""
        return asdict(self) | {"hidden": list(self.hidden)}

    def total_steps(self, steps_per_epoch: int) -> int:
        """The run's length in updates: --steps, or --epochs of steps_per_epoch each."""
        return self.steps if self.steps is not None else self.epochs * steps_per_epoch


class _Parser(argparse.ArgumentParser):
    """argparse that speaks from rank 0 only, so P ranks do not print P copies; `where`
    starts its error lines (a --config file's name)."""

    where = ""

    def error(self, message: str) -> NoReturn:
        fail(self.where + message)

    def print_help(self, file=None) -> None:
        if launcher.rank() == 0:
            super().print_help(file)


def _widths(text: str) -> tuple[int, ...]:
    """'16,16' -> (16, 16)."""
    try:
        return tuple(int(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,N,..., got '{text}'") from None


def build_parser(where: str = "") -> argparse.ArgumentParser:
    """The flags of train.py; `where` starts its error lines."""
    p = _Parser(prog="train.py", description="Synchronous data-parallel training of a small "
                "tanh network with Horovod (default: 1 -> 5 -> 1 on y = x^2).",
                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.where = where
    p.add_argument("--config", metavar="FILE", help="repeat a run from its config.json (or a "
                   ".yaml/.toml file of the same keys); flags given here override it")
    d = p.add_argument_group("data")
    d.add_argument("--n-points", type=int, default=50, help="N points of the built-in data, "
                   "x = linspace(-2, 2, N), y = x^2 (ignored with --data)")
    d.add_argument("--data", metavar="FILE", help=".npy (2-D, target last), .npz (x, y) or "
                   ".csv (header) to train on instead")
    d.add_argument("--target", metavar="COLUMN", help="CSV target column (default: the last)")
    d.add_argument("--val-data", metavar="FILE", help="held-out rows in --data's format: their "
                   "loss (and accuracy) over the whole file is logged; each rank reads its part")
    d.add_argument("--val-every", type=int, metavar="K", help="validate every K steps "
                   "(default: each epoch; full-batch runs: each log)")
    d.add_argument("--early-stop", type=int, metavar="PATIENCE", help="stop once the held-out "
                   "loss has not improved for PATIENCE validations; the best weights are kept")
    t = p.add_argument_group("training")
    t.add_argument("--mode", choices=tuple(modes.PACKAGES), default="sync",
                   help="; ".join(f"{n}: {modes.declared(n).help}" for n in modes.PACKAGES))
    t.add_argument("--elastic", action="store_true", help="the older spelling of --mode elastic")
    t.add_argument("--fetch-every", type=int, default=1, metavar="N",
                   help="async: a worker fetches the weights every N of its steps")
    t.add_argument("--push-every", type=int, default=1, metavar="M",
                   help="async: a worker pushes its summed gradients every M of its steps")
    length = t.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help=f"updates (default {DEFAULT_STEPS})")
    length.add_argument("--epochs", type=int, help="passes over the data, instead of --steps")
    t.add_argument("--batch-size", type=int, help="global batch over all ranks "
                   "(default: the whole data set, i.e. full-batch descent)")
    t.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="keep each rank's rows in file order instead of reshuffling per epoch")
    t.add_argument("--lr", type=float, default=0.01, help="learning rate")
    t.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd", help="update rule")
    t.add_argument("--momentum", type=float, default=0.9, help="momentum coefficient")
    t.add_argument("--beta1", type=float, default=0.9, help="adam: first-moment decay")
    t.add_argument("--beta2", type=float, default=0.999, help="adam: second-moment decay")
    t.add_argument("--eps", type=float, default=1e-8, help="adam: denominator epsilon")
    t.add_argument("--lr-schedule", choices=LR_SCHEDULES, default="constant",
                   help="the rate after the warm-up, by global step: cosine to 0 at the last "
                   "step, step (x RATE every EVERY steps) or exponential (x RATE per EVERY)")
    t.add_argument("--warmup", type=int, default=0, metavar="STEPS", help="rise linearly from "
                   "lr/STEPS to lr over the first STEPS updates (docs/flags.md: why not lr/P)")
    t.add_argument("--lr-decay-rate", type=float, default=0.1, metavar="RATE",
                   help="step and exponential schedules: the factor per period")
    t.add_argument("--lr-decay-every", type=int, default=0, metavar="EVERY",
                   help="step and exponential schedules: the period in updates (0: a third of "
                   "the updates after the warm-up)")
    t.add_argument("--weight-decay", type=float, default=0.0, metavar="WD", help="adam: "
                   "decoupled (AdamW); sgd and momentum: L2, WD * w added to the gradient")
    t.add_argument("--clip-norm", type=float, metavar="C", help="scale the combined gradient "
                   "down to global norm C when it is longer (the same on every rank)")
    t.add_argument("--hidden", type=_widths, default=(5,), metavar="H[,H...]",
                   help="tanh units per hidden layer of the built-in network, e.g. 5 or 16,16")
    t.add_argument("--model", metavar="FILE.py:FUNCTION", help="train your own Keras 3 model "
                   "instead: FUNCTION(input_shape, n_outputs) returns it (also "
                   "package.module:FUNCTION; docs/models.md)")
    t.add_argument("--loss", choices=LOSSES, default="mse", help="mse: mean squared error; "
                   "crossentropy: softmax cross-entropy of the outputs (logits) against integer "
                   "class targets 0..K-1, with accuracy logged")
    t.add_argument("--accumulate", type=int, default=1, metavar="K",
                   help="compute each rank's part of an update in K micro-batches (K backward "
                   "passes, one allreduce): the same update in less memory")
    t.add_argument("--compression", choices=COMPRESSIONS, default="none",
                   help="fp16: gradients travel as float16 in the allreduce (half the bytes, "
                   "float16 rounding)")
    t.add_argument("--dtype", choices=DTYPES, default="float32", help="precision of data, "
                   "weights, optimizer state and outputs; float64 makes P ranks agree with one "
                   "process to rounding (1e-15) instead of float32's (1e-6)")
    t.add_argument("--steps-per-call", type=int, default=0, metavar="K",
                   help="full-batch: run up to K updates in one compiled call (0: all of those "
                   "between two logs or checkpoints); 1 is one Python call per update")
    t.add_argument("--xla", choices=("auto", "on", "off"), default="auto",
                   help="compile each rank's loss and gradient with XLA; auto: only for steps "
                   "of 10^6 multiply-adds per rank or more, where fusing the passes over the "
                   "rows pays (short steps are slower with it)")
    t.add_argument("--seed", type=int, default=0, help="seed of the initial draw and shuffles")
    t.add_argument("--init-weights", metavar="FILE.npz", help="start from W1, b1, ..., WL, bL "
                   "(seed network: W1 (1,h), b1 (1,h), W2 (h,1), b2 (1,1))")
    o = p.add_argument_group("outputs")
    o.add_argument("--log-every", type=int, default=50, help="log the full-data loss every K "
                   "steps")
    o.add_argument("--metrics", metavar="FILE", help="JSON lines {step, loss, ...} per logged "
                   "step (default: OUTPUT_DIR/metrics.jsonl when --output-dir is given)")
    o.add_argument("--output-dir", metavar="DIR", help="rank 0 writes config.json, "
                   "weights.npz, metrics.jsonl, fit.png, tensorboard/, checkpoints/ here")
    o.add_argument("--checkpoint-every", type=int, default=0, metavar="K",
                   help="checkpoint into OUTPUT_DIR/checkpoints every K steps (0: never)")
    o.add_argument("--keep-checkpoints", type=int, default=3, metavar="N",
                   help="how many of the newest checkpoints to keep")
    o.add_argument("--resume", action="store_true", help="continue from the newest valid "
                   "checkpoint in OUTPUT_DIR/checkpoints (a fresh start if there is none)")
    o.add_argument("--checkpoint-on-signal", action="store_true", help="on SIGUSR1 or "
                   "SIGTERM (a scheduler's time-limit warning or preemption) stop at the next "
                   "logged step, checkpoint there and exit 75, for --resume to go on "
                   "(train.sbatch's requeue; docs/launching.md)")
    o.add_argument("--dump-rank-state", metavar="DIR", help="debugging: every rank writes its "
                   "final weights and optimizer slots to DIR/rank-R.npz")
    o.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="rank 0's progress bar; auto: only for one process in a terminal "
                   "(under mpirun every rank's output is a pseudo-terminal)")
    o.add_argument("--check", action="store_true", help="check the flags and the --data "
                   "file, then exit without training (0: good; 2 and one line: bad); "
                   "train.sbatch does this before it starts the ranks")
    return p


def _check(a: argparse.Namespace) -> None:
    """Reject values that parse but make no sense, naming the flag."""
    def unit(v: float) -> bool:
        return math.isfinite(v) and 0 <= v < 1
    rules = [
        (a.n_points >= 1, f"--n-points must be >= 1, got {a.n_points}"),
        (a.steps is None or a.steps >= 0, f"--steps must be >= 0, got {a.steps}"),
        (a.epochs is None or a.epochs >= 0, f"--epochs must be >= 0, got {a.epochs}"),
        (a.batch_size is None or a.batch_size >= 1,
         f"--batch-size must be >= 1, got {a.batch_size}"),
        (math.isfinite(a.lr) and a.lr > 0, f"--lr must be a positive number, got {a.lr}"),
        (unit(a.momentum), f"--momentum must be in [0, 1), got {a.momentum}"),
        (unit(a.beta1) and unit(a.beta2), f"--beta1/--beta2 must be in [0, 1), got "
         f"{a.beta1}/{a.beta2}"),
        (math.isfinite(a.eps) and a.eps > 0, f"--eps must be a positive number, got {a.eps}"),
        (a.warmup >= 0, f"--warmup must be >= 0, got {a.warmup}"),
        (a.steps is None or a.warmup <= a.steps,
         f"--warmup {a.warmup} is longer than the run (--steps {a.steps})"),
        (math.isfinite(a.lr_decay_rate) and 0 < a.lr_decay_rate <= 1,
         f"--lr-decay-rate must be in (0, 1], got {a.lr_decay_rate}"),
        (a.lr_decay_every >= 0, f"--lr-decay-every must be >= 0, got {a.lr_decay_every}"),
        (math.isfinite(a.weight_decay) and a.weight_decay >= 0,
         f"--weight-decay must be a number >= 0, got {a.weight_decay}"),
        (a.clip_norm is None or (math.isfinite(a.clip_norm) and a.clip_norm > 0),
         f"--clip-norm must be a positive number, got {a.clip_norm}"),
        (a.val_every is None or a.val_every >= 1, f"--val-every must be >= 1, got {a.val_every}"),
        (a.early_stop is None or a.early_stop >= 1,
         f"--early-stop must be >= 1, got {a.early_stop}"),
        (a.early_stop is None or a.val_data, "--early-stop needs held-out data (--val-data)"),
        (a.early_stop is None or not (a.checkpoint_every or a.resume or a.checkpoint_on_signal),
         "--early-stop keeps its best weights in memory: no --checkpoint-every, --resume or "
         "--checkpoint-on-signal"),
        (all(h >= 1 for h in a.hidden), f"--hidden must be >= 1 per layer, got "
         f"{','.join(map(str, a.hidden))}"),
        (a.accumulate >= 1, f"--accumulate must be >= 1, got {a.accumulate}"),
        (a.steps_per_call >= 0, f"--steps-per-call must be >= 0, got {a.steps_per_call}"),
        (a.steps_per_call <= 1 or a.batch_size is None,
         "--steps-per-call above 1 needs full-batch training (no --batch-size)"),
        (a.log_every >= 1, f"--log-every must be >= 1, got {a.log_every}"),
        (a.checkpoint_every >= 0, f"--checkpoint-every must be >= 0, got {a.checkpoint_every}"),
        (a.keep_checkpoints >= 1, f"--keep-checkpoints must be >= 1, got {a.keep_checkpoints}"),
        (a.output_dir or not (a.checkpoint_every or a.resume or a.checkpoint_on_signal),
         "--checkpoint-every, --resume and --checkpoint-on-signal need --output-dir"),
        (a.fetch_every >= 1 and a.push_every >= 1, "--fetch-every and --push-every must be "
         f">= 1, got {a.fetch_every} and {a.push_every}"),
        (a.target is None or (a.data or "").lower().endswith(".csv"),
         "--target applies to a .csv --data file only"),
    ]
    for ok, message in rules:
        if not ok:
            fail(message)
    _check_mode(a)


# What each option a mode may lack is called in its error line, and whether a run uses it.
OPTIONS = {
    "optimizer": ("--optimizer other than sgd", lambda a: a.optimizer != "sgd"),
    "epochs": ("--epochs", lambda a: a.epochs is not None),
    "batch_size": ("--batch-size", lambda a: a.batch_size is not None),
    "checkpoint_every": ("--checkpoint-every", lambda a: a.checkpoint_every > 0),
    "resume": ("--resume", lambda a: a.resume),
    "checkpoint_on_signal": ("--checkpoint-on-signal", lambda a: a.checkpoint_on_signal),
    "model": ("--model", lambda a: a.model is not None),
    "crossentropy": ("--loss crossentropy", lambda a: a.loss == "crossentropy"),
    "accumulate": ("--accumulate", lambda a: a.accumulate > 1),
    "compression": ("--compression", lambda a: a.compression != "none"),
    "val_data": ("--val-data", lambda a: a.val_data is not None),
    "lr_schedule": ("--lr-schedule or --warmup", lambda a: a.lr_schedule != "constant"
                    or a.warmup > 0),
    "weight_decay": ("--weight-decay", lambda a: a.weight_decay > 0),
    "clip_norm": ("--clip-norm", lambda a: a.clip_norm is not None),
}


def _check_mode(a: argparse.Namespace) -> None:
    """Ask the chosen mode whether it has every option the run uses; one line if not."""
    named = "--elastic" if a.elastic else f"--mode {a.mode}"  # as the user wrote it
    for group in modes.declared(a.mode).lacks:
        if any(OPTIONS[o][1](a) for o in group.options):
            words = [OPTIONS[o][0] for o in group.options]
            listed = ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]
            fail(f"{named} {group.says}: no {listed}{group.after}")


def parse(argv: list[str] | None = None) -> Config:
    """Parse and check argv (sys.argv[1:] by default) over --config's file, if one is given;
    exits with one line on a bad value."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.config:
        args = parser.parse_args(_from_file(args.config, parser, argv) + argv)
    if args.elastic:
        _elastic_alias(args)
    _check(args)
    if args.elastic and launcher.rank() == 0 and "--elastic" in argv:  # once, if all is good
        sys.stderr.write("dptrain: note: --elastic is the older spelling of --mode elastic\n")
    if args.steps is None and args.epochs is None:
        args.steps = DEFAULT_STEPS
    del args.config, args.elastic
    return Config(**vars(args))


def _from_file(path: str, parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The flags --config's file stands for, less those the command line gives (it wins)."""
    try:
        values = config_file.read(path, set(Config.__dataclass_fields__))
        given = _given(parser, argv)
        for group in parser._mutually_exclusive_groups:  # --steps or --epochs: argv's choice
            dests = {a.dest for a in group._group_actions}
            if given & dests:
                values = {k: v for k, v in values.items() if k not in dests}
        tokens = config_file.as_flags(values, parser, path)
    except JobError as e:
        fail(str(e))
    build_parser(f"--config {path}: ").parse_args(tokens)  # its own bad values name the file
    return tokens


def _given(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The dests argv sets: argparse leaves a namespace's existing attributes alone unless a
    flag sets them, so every dest starts as a marker."""
    marker = object()
    ns = argparse.Namespace(**{a.dest: marker for a in parser._actions})
    parser.parse_args(argv, ns)
    return {k for k, v in vars(ns).items() if v is not marker}


def _elastic_alias(args: argparse.Namespace) -> None:
    """--elastic is --mode elastic, and refuses another --mode beside it."""
    if args.mode not in ("sync", "elastic"):
        fail(f"--elastic is --mode elastic: it cannot go with --mode {args.mode}")
    args.mode = "elastic"
