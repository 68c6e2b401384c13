"""Mini-batch schedule: which of its own rows each rank uses in each global batch.

Epoch e lays the N samples out in global positions 0..N-1, position p belonging to rank
p mod P at that rank's local position p // P (rank r holds exactly as many positions as rows:
the first N mod P ranks one more). Global batch b of an epoch is positions [bB, (b+1)B), so
every batch has B samples (the epoch's last one N mod B, if that is not zero), every rank's
share differs from the others' by at most one, and each epoch uses every sample exactly once.
A rank's local positions map to its rows through a permutation of its rows drawn from
(seed, epoch, rank), or the identity with shuffling off. With B = N (the default) there is
one batch, the whole data set, every step.
"""
from __future__ import annotations

import math

import numpy as np


class Schedule:
    """The batches of one rank of a P-rank job over N samples, global batch size B."""

    def __init__(self, n: int, size: int, rank: int, local_rows: int, batch: int,
                 seed: int, shuffle: bool):
        self.n, self.size, self.rank, self.rows = n, size, rank, local_rows
        self.batch, self.seed, self.shuffle = batch, seed, shuffle
        self.steps_per_epoch = math.ceil(n / batch)
        self._epoch, self._order = -1, np.arange(local_rows)

    @property
    def full_batch(self) -> bool:
        """One batch per epoch holding every sample: the same rows every step."""
        return self.batch >= self.n

    def global_batch_size(self, step: int) -> int:
        """Samples in the global batch of this step (B, or the epoch's remainder)."""
        b = step % self.steps_per_epoch
        return min(self.batch, self.n - b * self.batch)

    def local_rows(self, step: int) -> np.ndarray:
        """This rank's row indices (into its own slice) for the given step."""
        epoch, b = divmod(step, self.steps_per_epoch)
        lo, hi = b * self.batch, min((b + 1) * self.batch, self.n)
        # Local positions q with lo <= q*P + rank < hi.
        q0 = max(0, -(-(lo - self.rank) // self.size))
        q1 = min(self.rows, -(-(hi - self.rank) // self.size))
        return self._permutation(epoch)[q0:max(q0, q1)]

    def _permutation(self, epoch: int) -> np.ndarray:
        if self.shuffle and epoch != self._epoch:
            rng = np.random.default_rng([self.seed, epoch, self.rank])
            self._order, self._epoch = rng.permutation(self.rows), epoch
        return self._order
