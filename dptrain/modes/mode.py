"""What a mode declares about itself: its name, a line for --help, and what it lacks.

Each mode's package says this in its __init__.py, next to its job and without loading
TensorFlow, so the parser can ask the chosen mode before anything heavy starts.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lacks:
    """Options a mode does not have, and the one line that says so when one is used."""

    says: str  # what the mode does instead, e.g. "applies plain SGD for --steps updates"
    options: tuple[str, ...]  # keys of cli.OPTIONS, in the order the line names them
    after: str = ""  # said after the list, e.g. " (sync mode has them)"


@dataclass(frozen=True)
class Mode:
    """A mode as the parser sees it."""

    name: str
    help: str
    lacks: tuple[Lacks, ...] = ()

    def supports(self, option: str) -> bool:
        """Whether this mode has the option (a key of cli.OPTIONS)."""
        return not any(option in group.options for group in self.lacks)
