"""Checkpoints: weights, optimizer slots, step and config in one .npz, checksummed, no pickle.

A checkpoint is written to a temporary file, fsync'd and renamed, so a crash leaves either the
old set or the new one, never half a file. Its `checksum` array is the SHA-256 of every other
array (name, dtype, shape and bytes), so a truncated or altered file is detected and skipped.
The shuffle position needs no saving: the batches are a function of (seed, step, ranks).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re

import numpy as np

from dptrain.errors import JobError
from dptrain.outputs.report import atomic_write, warn

FORMAT = 1
PATTERN = re.compile(r"ckpt-(\d{9})\.npz$")


def path_for(folder: str, step: int) -> str:
    """Where the checkpoint of a step lives."""
    return os.path.join(folder, f"ckpt-{step:09d}.npz")


def _digest(arrays: dict[str, np.ndarray]) -> np.ndarray:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return np.frombuffer(h.hexdigest().encode(), np.uint8)


def save(folder: str, step: int, params: dict, slots: dict, meta: dict, keep: int) -> str:
    """Write the checkpoint of `step` atomically, then drop all but the newest `keep`."""
    os.makedirs(folder, exist_ok=True)
    meta = meta | {"format": FORMAT, "step": step}
    arrays = {f"param.{k}": v for k, v in params.items()}
    arrays |= {f"slot.{k}": v for k, v in slots.items()}
    arrays["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    arrays["checksum"] = _digest(arrays)
    path = path_for(folder, step)
    atomic_write(path, lambda f: np.savez(f, **arrays))
    for old in sorted(_listed(folder))[:-keep] if keep > 0 else []:
        os.unlink(old[1])
    return path


def _listed(folder: str) -> list[tuple[int, str]]:
    found = []
    for p in glob.glob(os.path.join(folder, "ckpt-*.npz")):
        m = PATTERN.search(p)
        if m:
            found.append((int(m.group(1)), p))
    return found


def load(path: str) -> tuple[dict, dict, dict]:
    """(params, slots, meta) of a checkpoint; JobError if it is damaged in any way."""
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as e:  # noqa: BLE001 (truncation shows as several error types)
        raise JobError(f"checkpoint {path} is unreadable ({type(e).__name__})") from None
    stored = arrays.pop("checksum", None)
    if stored is None or "meta" not in arrays or not np.array_equal(stored, _digest(arrays)):
        raise JobError(f"checkpoint {path} fails its checksum")
    meta = json.loads(bytes(arrays.pop("meta")).decode())
    params = {k[6:]: v for k, v in arrays.items() if k.startswith("param.")}
    slots = {k[5:]: v for k, v in arrays.items() if k.startswith("slot.")}
    return params, slots, meta


def latest_valid(folder: str) -> tuple[dict, dict, dict] | None:
    """The newest checkpoint in folder that loads and verifies; damaged ones are skipped."""
    for _, path in sorted(_listed(folder), reverse=True):
        try:
            return load(path)
        except JobError as e:
            warn(f"skipping {e}")
    return None
