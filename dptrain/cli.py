"""Command line: flags, their checks, and the resolved configuration."""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass
from typing import NoReturn

from .errors import fail, launcher_rank


@dataclass(frozen=True)
class Config:
    """Everything a run depends on; written to config.json."""

    n_points: int
    steps: int
    lr: float
    hidden: int
    seed: int
    log_every: int
    init_weights: str | None
    metrics: str | None
    output_dir: str | None

    def as_dict(self) -> dict:
        """JSON-ready view."""
        return asdict(self)


class _Parser(argparse.ArgumentParser):
    """argparse that speaks from rank 0 only, so P ranks do not print P copies."""

    def error(self, message: str) -> NoReturn:
        fail(message)

    def print_help(self, file=None) -> None:
        if launcher_rank() == 0:
            super().print_help(file)


def build_parser() -> argparse.ArgumentParser:
    """The flags of train.py."""
    p = _Parser(prog="train.py", description="Synchronous data-parallel training of a "
                "1 -> hidden tanh -> 1 network on y = x^2 with Horovod.",
                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n-points", type=int, default=50, help="N points, x = linspace(-2, 2, N)")
    p.add_argument("--steps", type=int, default=2000, help="full-batch gradient-descent steps")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate")
    p.add_argument("--hidden", type=int, default=5, help="tanh units in the hidden layer")
    p.add_argument("--seed", type=int, default=0, help="seed of the standard-normal initial draw")
    p.add_argument("--log-every", type=int, default=50, help="log the full-data loss every K steps")
    p.add_argument("--init-weights", metavar="FILE.npz", help="start from W1 (1,h), b1 (1,h), "
                   "W2 (h,1), b2 (1,1) instead of the random draw")
    p.add_argument("--metrics", metavar="FILE", help="JSON lines {step, loss, ...} per logged step "
                   "(default: OUTPUT_DIR/metrics.jsonl when --output-dir is given)")
    p.add_argument("--output-dir", metavar="DIR", help="rank 0 writes config.json, weights.npz "
                   "and metrics.jsonl here")
    return p


def _check(a: argparse.Namespace) -> None:
    """Reject values that parse but make no sense, naming the flag."""
    rules = [
        (a.n_points >= 1, f"--n-points must be >= 1, got {a.n_points}"),
        (a.steps >= 0, f"--steps must be >= 0, got {a.steps}"),
        (math.isfinite(a.lr) and a.lr > 0, f"--lr must be a positive number, got {a.lr}"),
        (a.hidden >= 1, f"--hidden must be >= 1, got {a.hidden}"),
        (a.log_every >= 1, f"--log-every must be >= 1, got {a.log_every}"),
    ]
    for ok, message in rules:
        if not ok:
            fail(message)


def parse(argv: list[str] | None = None) -> Config:
    """Parse and check argv (sys.argv[1:] by default); exits with one line on a bad value."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    _check(args)
    return Config(**vars(args))
