"""Keras 3 in the patched Horovod: its tape, broadcast, SyncBatchNormalization and model.fit.

tests/helpers/keras3_worker.py runs each check on real MPI ranks against a reference that every rank
computes alone in float64 (the mean of all ranks' plain-TensorFlow gradients, rank 0's initial
weights, BatchNormalization on all ranks' rows), so no Horovod collective checks itself.
"""
from __future__ import annotations

import pytest

from conftest import PLATFORM, worker_errors

# Keras 3 through the patched Horovod build; the checks share two runs (np2, np3): one worker.
pytestmark = [PLATFORM, pytest.mark.xdist_group("keras3")]

CHECKS = ["tape_eager", "tape_function", "broadcast_eager", "broadcast_function",
          "partial_tape", "sync_batch_norm", "fit"]


@pytest.fixture(scope="module", params=[2, 3], ids=lambda p: f"np{p}")
def errors(request, tmp_path_factory) -> dict:
    """Largest error of each check, from one real run on P ranks."""
    return worker_errors("keras3_worker.py", request.param, tmp_path_factory.mktemp("keras3"),
                         timeout=240)


@pytest.mark.parametrize("check", CHECKS)
def test_horovod_matches_the_independent_reference(errors, check) -> None:
    # float64 throughout: a sum over 2-3 ranks and the same sum done here differ by rounding only.
    assert errors[check] <= 1e-12, errors
