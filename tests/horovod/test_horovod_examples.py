"""The harness that runs Horovod's own example scripts unedited (scripts/horovod_examples.sh,
tests/helpers/horovod_examples/): the data it serves in MNIST's place, and its weights check, which
must see ranks apart when they are (the script's negative control does the same end to end).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import HELPERS, PYTHON, run

pytestmark = pytest.mark.fast  # one plain process each, no launcher
HERE = HELPERS / "horovod_examples"


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> dict:
    """digits_as_mnist.py's file, and its arrays."""
    path = tmp_path_factory.mktemp("mnist") / "digits.npz"
    res = run([PYTHON, str(HERE / "digits_as_mnist.py"), str(path)])
    assert res.rc == 0, res.stderr
    return {"path": path, **np.load(path)}


def test_the_served_data_is_the_digits_in_mnist_format(digits) -> None:
    from sklearn.datasets import load_digits

    ref = load_digits()
    x = np.concatenate([digits["x_train"], digits["x_test"]])
    y = np.concatenate([digits["y_train"], digits["y_test"]])
    assert x.dtype == np.uint8 and x.shape == (1797, 8, 8) and x.max() == 255
    np.testing.assert_array_equal(y, ref.target)
    np.testing.assert_allclose(x / 255 * 16, ref.images, atol=16 / 255 / 2 + 1e-12)


def test_keras_mnist_load_data_reads_the_served_file(digits, tmp_path) -> None:
    out = tmp_path / "loaded.npz"
    code = ("import sys, numpy as np, keras\n"
            "(a, b), (c, d) = keras.datasets.mnist.load_data(path='mnist-0.npz')\n"
            "np.savez(sys.argv[1], x_train=a, y_train=b, x_test=c, y_test=d)\n")
    # An empty KERAS_HOME: a real mnist.npz cached there would be taken without the hook.
    env = {"PYTHONPATH": str(HERE), "DPTRAIN_MNIST": str(digits["path"]),
           "KERAS_HOME": str(tmp_path / "keras-home")}
    res = run([PYTHON, "-c", code, str(out)], env=env, timeout=120)
    assert res.rc == 0, res.stderr
    loaded = np.load(out)
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(loaded[key], digits[key])


def save_ranks(folder, arrays_per_rank: list[dict]) -> None:
    folder.mkdir()
    for rank, arrays in enumerate(arrays_per_rank):
        np.savez(folder / f"rank-{rank}.npz", **arrays)


def same_weights(folder) -> tuple[int, str]:
    res = run([PYTHON, str(HERE / "same_weights.py"), str(folder), "2"])
    return res.rc, res.stdout


def test_the_weights_check_passes_equal_ranks_and_names_what_differs(tmp_path) -> None:
    w = {"0.sequential.0": np.arange(6.0).reshape(2, 3), "0.sequential.1": np.ones(3)}
    save_ranks(tmp_path / "equal", [w, w])
    assert same_weights(tmp_path / "equal") == (0, "weights: 2 arrays bit-identical on 2 ranks\n")
    apart = dict(w, **{"0.sequential.1": np.nextafter(np.ones(3), 2)})  # one ulp off
    save_ranks(tmp_path / "apart", [w, apart])
    rc, out = same_weights(tmp_path / "apart")
    assert rc == 1 and "0.sequential.1 differs between rank 0 and rank-1" in out


def test_the_weights_check_fails_where_a_rank_saved_nothing(tmp_path) -> None:
    save_ranks(tmp_path / "one", [{"0.m.0": np.zeros(2)}])
    assert same_weights(tmp_path / "one") == (2, "weights: no weights from rank-1.npz\n")
