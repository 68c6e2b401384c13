"""Outputs, all written by rank 0: console, metrics JSON lines, TensorBoard, config, weights."""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from typing import IO

import numpy as np

from dptrain.errors import JobError


def atomic_write(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a temporary file in the same directory, fsync, rename: never half a file."""
    def to_file(tmp: str) -> None:
        with open(tmp, "wb") as f:
            write(f)
    atomic_save(path, to_file)


def atomic_save(path: str, save: Callable[[str], None]) -> None:
    """save(tmp) writes a temporary path beside `path` that ends as `path` does (model.keras:
    Keras picks its format by the ending); it is fsync'd and renamed into place."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        save(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; honour the user's umask instead
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def say(line: str) -> None:
    """A console line for people, in one write: labelling launchers (srun -l, mpirun
    --tag-output) label each write, so print()'s separate newline would become a stray line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def warn(message: str) -> None:
    """A non-fatal note on stderr."""
    sys.stderr.write(f"dptrain: warning: {message}\n")
    sys.stderr.flush()


HOSTNAME_BYTES = 64  # RFC 1035 caps a label at 63


def hostname_row() -> np.ndarray:
    """This host's name as fixed-width bytes, for an allgather without pickling."""
    row = np.zeros(HOSTNAME_BYTES, np.uint8)
    raw = socket.gethostname().encode()[:HOSTNAME_BYTES]
    row[:len(raw)] = np.frombuffer(raw, np.uint8)
    return row


def hostnames_from(rows: np.ndarray) -> list[str]:
    """The names in gathered hostname_row()s, in rank order."""
    rows = rows.reshape(-1, HOSTNAME_BYTES)
    return [bytes(r).rstrip(b"\0").decode(errors="replace") for r in rows]


def placement(hosts: list[str]) -> str:
    """'ranks 3 on 2 hosts: a [0 1], b [2]' from each rank's hostname."""
    ranks: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        ranks.setdefault(host, []).append(rank)
    where = ", ".join(f"{h} [{' '.join(map(str, r))}]" for h, r in ranks.items())
    return f"ranks {len(hosts)} on {len(ranks)} host{'s' * (len(ranks) != 1)}: {where}"


def metrics_path(config: dict) -> str | None:
    """--metrics, else OUTPUT_DIR/metrics.jsonl, else None."""
    out = config.get("output_dir")
    return config.get("metrics") or (os.path.join(out, "metrics.jsonl") if out else None)


class Reporter:
    """Rank 0's sink for everything a run reports; other ranks get one that writes nothing."""

    def __init__(self, enabled: bool = False, size: int = 1, metrics: str | None = None,
                 tensorboard: str | None = None, total_steps: int = 0, start: int = 0,
                 progress: bool = False, carried: dict | None = None):
        self.enabled, self.size = enabled, size
        # A resumed run's newest kept record: its wall time goes on, and its step's record,
        # logged again here, keeps the step time measured in the allocation that ran the steps.
        self._carried = carried or {}
        self._metrics: IO[str] | None = None
        self._tb = self._bar = None
        if not enabled:
            return
        if metrics:
            self._metrics = open(metrics, "a", encoding="utf-8")  # noqa: SIM115 (run-long)
        if tensorboard:
            import tensorflow as tf  # only rank 0 with --output-dir pays for the writer
            self._tb = tf.summary.create_file_writer(tensorboard)
        if progress:  # a person is watching: a bar; otherwise plain lines
            from tqdm import tqdm
            self._bar = tqdm(total=total_steps, initial=start, unit="step", dynamic_ncols=True)

    def log(self, step: int, loss: float, sec_per_step: float | None,
            extra: dict | None = None) -> None:
        """One logged step: a console line, a JSON line, a TensorBoard point."""
        if not self.enabled:
            return
        extra, before = extra or {}, self._carried
        if sec_per_step is None and step == before.get("step"):
            sec_per_step = before.get("sec_per_step")
        if "wall" in extra and before.get("wall") is not None:
            extra = extra | {"wall": before["wall"] + extra["wall"]}
        timing = "" if sec_per_step is None else f"  {sec_per_step * 1e3:8.3f} ms/step"
        score = f"  accuracy {extra['accuracy']:.4f}" if "accuracy" in extra else ""
        if "val_loss" in extra:
            score += f"  val_loss {extra['val_loss']:.6e}"
        if "val_accuracy" in extra:
            score += f"  val_accuracy {extra['val_accuracy']:.4f}"
        line = f"step {step:6d}  loss {loss:.6e}{score}{timing}  ranks {self.size}"
        if self._bar is not None:
            self._bar.set_postfix(loss=f"{loss:.4e}", refresh=False)
            self._bar.write(line)
        else:
            say(line)
        if self._metrics:
            record = {"step": step, "loss": loss, "sec_per_step": sec_per_step,
                      "ranks": self.size} | extra
            self._metrics.write(json.dumps(record) + "\n")
            self._metrics.flush()
        if self._tb is not None:
            import tensorflow as tf
            with self._tb.as_default(step=step):
                tf.summary.scalar("loss", tf.constant(loss, tf.float64))  # 1e70 fits
                for name in ("accuracy", "val_loss", "val_accuracy", "lr"):
                    if name in extra:
                        tf.summary.scalar(name, tf.constant(extra[name], tf.float64))
                if sec_per_step is not None:
                    tf.summary.scalar("sec_per_step", sec_per_step)

    def tick(self, steps: int = 1) -> None:
        """Steps done (moves the progress bar, if any)."""
        if self._bar is not None:
            self._bar.update(steps)

    def close(self) -> None:
        """Flush and close everything."""
        if self._bar is not None:
            self._bar.close()
        if self._metrics:
            self._metrics.close()
        if self._tb is not None:
            self._tb.flush()
        self._metrics = self._tb = self._bar = None


def open_reporter(config: dict, hosts: list[str], total_steps: int, start: int,
                  progress: bool) -> Reporter:
    """Rank 0's reporter: prints the placement, creates --output-dir, writes config.json."""
    out, metrics = config.get("output_dir"), metrics_path(config)
    say(placement(hosts))
    try:
        if out:
            os.makedirs(out, exist_ok=True)
            save_config(os.path.join(out, "config.json"),
                        config | {"ranks": len(hosts), "hosts": hosts})
        carried = _keep_records_before(metrics, start) if metrics else None
        return Reporter(True, len(hosts), metrics,
                        os.path.join(out, "tensorboard") if out else None, total_steps, start,
                        progress, carried)
    except OSError as e:
        raise JobError(f"cannot write {e.filename}: {e.strerror}") from None


def _keep_records_before(path: str, step: int) -> dict | None:
    """A fresh run empties the metrics file; a resumed one keeps the records before its step.
    Returns the newest record up to that step (the one the run carries on from), or None."""
    lines = []
    if step > 0 and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            lines = [(ln, json.loads(ln)) for ln in f if ln.strip()]
    upto = [(ln, r) for ln, r in lines if r["step"] <= step]
    kept = "".join(ln for ln, r in upto if r["step"] < step)
    atomic_write(path, lambda f: f.write(kept.encode()))
    return upto[-1][1] if upto else None


def save_config(path: str, config: dict) -> None:
    """The resolved configuration, as JSON."""
    atomic_write(path, lambda f: f.write((json.dumps(config, indent=2) + "\n").encode()))


def save_weights(path: str, params: dict[str, np.ndarray]) -> None:
    """Weights in the --init-weights .npz format (W1, b1, ..., WL, bL)."""
    atomic_write(path, lambda f: np.savez(f, **params))


def save_keras_model(path: str, model) -> None:
    """A Keras model's .keras file (architecture and weights), written atomically."""
    atomic_save(path, model.save)
