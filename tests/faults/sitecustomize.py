"""Fault injection for the failure tests: on PYTHONPATH, Python imports this at start-up.

DPTRAIN_FAULT=KIND:RANK:STEP makes rank RANK, when it is about to run step STEP, do KIND:
  raise  raise RuntimeError (a bug in user code)
  oom    allocate an impossible array: numpy's real MemoryError
  kill   SIGKILL itself (the node died, the OOM killer struck)
It writes the time it fired to $DPTRAIN_FAULT_STAMP, so a test can time the job's end.
DPTRAIN_STEP_DELAY=SECONDS makes every rank's every update take that much longer (a slow job
for the time-limit tests, with the same numbers).
Works under every launcher, since it needs nothing but the environment.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import signal
import sys
import time


def _fire(kind: str, step: int) -> None:
    with open(os.environ["DPTRAIN_FAULT_STAMP"], "w") as f:
        f.write(repr(time.time()))
    if kind == "raise":
        raise RuntimeError(f"injected fault at step {step}")
    if kind == "oom":
        import numpy as np
        np.ones(1 << 43)  # 64 TiB: more than any test machine has, so a real MemoryError
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)


def _slow(sync) -> None:
    delay = float(os.environ["DPTRAIN_STEP_DELAY"])
    advance = sync.Trainer.advance

    def slow(self, k: int, count: int) -> int:
        time.sleep(delay * count)
        return advance(self, k, count)

    sync.Trainer.advance = slow


def _patch(sync) -> None:
    if os.environ.get("DPTRAIN_STEP_DELAY"):
        _slow(sync)
    if not os.environ.get("DPTRAIN_FAULT"):
        return
    from dptrain import launcher
    kind, rank, step = os.environ["DPTRAIN_FAULT"].split(":")
    if launcher.rank() != int(rank):
        return
    advance = sync.Trainer.advance

    def faulty(self, k: int, count: int) -> int:
        if k < int(step) <= k + count:
            _fire(kind, int(step))
        return advance(self, k, count)

    sync.Trainer.advance = faulty


class _Finder(importlib.abc.MetaPathFinder):
    """Patches dptrain.sync right after it is first imported."""

    def find_spec(self, name, path, target=None):
        if name != "dptrain.sync":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("DPTRAIN_FAULT") or os.environ.get("DPTRAIN_STEP_DELAY"):
    sys.meta_path.insert(0, _Finder())
