"""The three modes by name: each package declares itself (MODE, in its __init__.py) and runs
from its job.py, which is imported only once the flags are good."""
from __future__ import annotations

import importlib

from dptrain.modes.mode import Mode

PACKAGES = {"sync": "sync", "elastic": "elastic", "async": "async_ps"}  # --mode NAME: package


def declared(name: str) -> Mode:
    """The mode's declaration (no TensorFlow loaded)."""
    return importlib.import_module(f"dptrain.modes.{PACKAGES[name]}").MODE


def run(config, source, held_out=None) -> None:
    """Run config's mode on source (and --val-data's held_out source, for the modes that
    have it): import its job and call its main."""
    job = importlib.import_module(f"dptrain.modes.{PACKAGES[config.mode]}.job")
    if held_out is None:
        job.main(config, source)
    else:
        job.main(config, source, held_out)
