"""Horovod's Keras API (horovod.tensorflow.keras) under Keras 3, on real MPI ranks: what
Horovod's own test_tensorflow2_keras.py checks through Keras 2 code that Keras 3 rejects
(scripts/horovod_tests.sh deselects those tests and names this file).

tests/helpers/keras_api_worker.py runs each check against a float64 reference that every rank computes
alone: gradient accumulation, Keras 3's optimizer.apply(), sparse-as-dense, broadcast with
local variables, PartialDistributedOptimizer, the warm-up callback with momentum correction, metric averaging, load_model.
"""
from __future__ import annotations

import pytest

from conftest import PLATFORM, worker_errors

pytestmark = [PLATFORM, pytest.mark.xdist_group("keras_api")]

# float64 throughout, except where Keras or Horovod keeps a value in float32: the optimizer's
# learning-rate variable, and MetricAverageCallback's allreduce of a logged float.
TOLERANCE = {"accumulate": 1e-12, "apply": 1e-12, "partial_optimizer": 1e-12,
             "sparse_as_dense": 1e-12,
             "broadcast_local_vars": 0.0, "lr_warmup": 1e-7, "metric_average": 1e-6,
             "load_model": 1e-12}


@pytest.fixture(scope="module", params=[2, 3], ids=lambda p: f"np{p}")
def errors(request, tmp_path_factory) -> dict:
    """Largest error of each check, from one real run on P ranks."""
    return worker_errors("keras_api_worker.py", request.param, tmp_path_factory.mktemp("keras_api"),
                         timeout=300)


@pytest.mark.parametrize("check", sorted(TOLERANCE))
def test_horovod_keras_api_matches_the_independent_reference(errors, check) -> None:
    assert errors[check] <= TOLERANCE[check], errors
