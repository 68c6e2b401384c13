"""Outputs, all written by rank 0: console lines, metrics JSON lines, config and weights."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import IO, Callable

import numpy as np

from .errors import JobError


def atomic_write(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a temporary file in the same directory, fsync, rename: never half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; honour the user's umask instead
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def open_reporter(config: dict, hosts: list[str]) -> Reporter:
    """Rank 0's reporter: creates --output-dir, writes config.json, opens the metrics file."""
    out, metrics = config.get("output_dir"), config.get("metrics")
    say(placement(hosts))
    try:
        if out:
            os.makedirs(out, exist_ok=True)
            save_config(os.path.join(out, "config.json"),
                        config | {"ranks": len(hosts), "hosts": hosts})
            metrics = metrics or os.path.join(out, "metrics.jsonl")
        return Reporter(True, len(hosts), metrics)
    except OSError as e:
        raise JobError(f"cannot write {e.filename}: {e.strerror}") from None


def say(line: str) -> None:
    """A console line for people, in one write: labelling launchers (srun -l, mpirun
    --tag-output) label each write, so print()'s separate newline would become a stray line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def placement(hosts: list[str]) -> str:
    """'ranks 3 on 2 hosts: a [0 1], b [2]' from each rank's hostname."""
    ranks: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        ranks.setdefault(host, []).append(rank)
    where = ", ".join(f"{h} [{' '.join(map(str, r))}]" for h, r in ranks.items())
    return f"ranks {len(hosts)} on {len(ranks)} host{'s' * (len(ranks) != 1)}: {where}"


class Reporter:
    """Rank 0's sink for everything a run reports; other ranks get one with nothing to write."""

    def __init__(self, enabled: bool, size: int, metrics_path: str | None = None):
        self.enabled, self.size = enabled, size
        self._metrics: IO[str] | None = None
        if enabled and metrics_path:
            self._metrics = open(metrics_path, "w", encoding="utf-8")

    def log(self, step: int, loss: float, sec_per_step: float) -> None:
        """One logged step: a console line for people and a JSON line for programs."""
        if not self.enabled:
            return
        timing = "compile" if step == 0 else f"{sec_per_step * 1e3:8.3f} ms/step"
        say(f"step {step:6d}  loss {loss:.6e}  {timing}  ranks {self.size}")
        if self._metrics:
            record = {"step": step, "loss": loss, "sec_per_step": sec_per_step, "ranks": self.size}
            self._metrics.write(json.dumps(record) + "\n")
            self._metrics.flush()

    def close(self) -> None:
        """Flush and close the metrics file."""
        if self._metrics:
            self._metrics.close()
            self._metrics = None


def save_config(path: str, config: dict) -> None:
    """The resolved configuration, as JSON."""
    atomic_write(path, lambda f: f.write((json.dumps(config, indent=2) + "\n").encode()))


def save_weights(path: str, params: dict[str, np.ndarray]) -> None:
    """Weights in the --init-weights .npz format (W1, b1, W2, b2)."""
    atomic_write(path, lambda f: np.savez(f, **params))

