"""Fault injection for the failure tests: on PYTHONPATH, Python imports this at start-up.

DPTRAIN_FAULT=KIND:RANK:STEP makes rank RANK, when it is about to run step STEP, do KIND:
  raise  raise RuntimeError (a bug in user code)
  oom    allocate an impossible array: numpy's real MemoryError
  kill   SIGKILL itself (the node died, the OOM killer struck)
It writes the time it fired to $DPTRAIN_FAULT_STAMP, so a test can time the job's end.
DPTRAIN_STEP_DELAY=SECONDS makes every rank's every update take that much longer (a slow job
for the time-limit tests, with the same numbers).
Works under every launcher, since it needs nothing but the environment.

It patches TARGET, the training step's one entry (every sync and elastic update goes through
it). A rename cannot turn it off unnoticed: a process that imported dptrain's loop under
another name, or ended without the patch, says so on stderr and exits 3; and
tests/errors/test_fault_hook.py runs a job with each hook on and checks that it fired.
"""
from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import os
import signal
import sys
import time

TARGET = ("dptrain.step.loop", "Trainer", "advance")  # module, class, method
_patched: list[str] = []


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


def _wrap(module, around) -> None:
    """Replace TARGET's method by around(original)."""
    cls = getattr(module, TARGET[1])
    setattr(cls, TARGET[2], around(getattr(cls, TARGET[2])))


def _slow(advance):
    delay = float(os.environ["DPTRAIN_STEP_DELAY"])

    def slow(self, k: int, count: int) -> int:
        time.sleep(delay * count)
        return advance(self, k, count)
    return slow


def _faulty(advance):
    kind, _, step = os.environ["DPTRAIN_FAULT"].split(":")

    def faulty(self, k: int, count: int) -> int:
        if k < int(step) <= k + count:
            _fire(kind, int(step))
        return advance(self, k, count)
    return faulty


def _patch(module) -> None:
    if os.environ.get("DPTRAIN_STEP_DELAY"):
        _wrap(module, _slow)
    if os.environ.get("DPTRAIN_FAULT"):
        from dptrain.ranks import launcher
        if launcher.rank() == int(os.environ["DPTRAIN_FAULT"].split(":")[1]):
            _wrap(module, _faulty)
    _patched.append(module.__name__)


def _check_patched() -> None:
    """At exit: a process that ran a training job's steps without the patch means TARGET
    moved; say so, rather than let a fault test pass or fail for the wrong reason."""
    stepped = [m for m in sys.modules if m.startswith("dptrain.modes.") and m.endswith(".job")
               and not m.startswith("dptrain.modes.async_ps")]  # async's steps are NumPy's
    if stepped and not _patched:
        sys.stderr.write(f"tests/helpers/faults: {'.'.join(TARGET)} was never imported: the "
                         "fault hook is stale (TARGET in its sitecustomize.py)\n")
        sys.stderr.flush()
        os._exit(3)


class _Finder(importlib.abc.MetaPathFinder):
    """Patches TARGET's module right after it is first imported."""

    def find_spec(self, name, path, target=None):
        if name != TARGET[0]:
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
    atexit.register(_check_patched)
