"""--model's result as Keras users keep it: OUTPUT_DIR/model.keras loads with
keras.models.load_model and predicts what the job's final weights (weights.npz) predict; the
held-out scores are in the metrics and in TensorBoard."""
from __future__ import annotations

import json

import pytest

from conftest import MODELS, PYTHON, TRAIN, read_metrics, run, tensorboard_scalars

pytestmark = pytest.mark.platform  # the Keras 3 file format, one process

CHECK = """
import json, sys
import numpy as np
import keras
sys.path.insert(0, sys.argv[4])
from digits_model import cnn
keras.config.set_floatx("float64")
data, out = np.load(sys.argv[1]), sys.argv[2]
x = data["x"][: int(sys.argv[3])]
loaded = keras.models.load_model(out + "/model.keras")
rebuilt = cnn(x.shape[1:], loaded.output_shape[-1])
with np.load(out + "/weights.npz") as w:  # names start with the variable's position
    rebuilt.set_weights([w[k] for k in sorted(w)])
a, b = loaded.predict(x, verbose=0), rebuilt.predict(x, verbose=0)
print(json.dumps({"gap": float(np.abs(a - b).max()), "spread": float(np.abs(a).max()),
                  "dtype": str(a.dtype)}))
"""


def test_model_keras_loads_and_predicts_what_the_final_weights_predict(digits, tmp_path):
    out = tmp_path / "run"
    res = run([PYTHON, str(TRAIN), "--data", str(digits), "--model", f"{MODELS}:cnn",
               "--loss", "crossentropy", "--optimizer", "adam", "--lr", "0.01", "--steps", "6",
               "--log-every", "3", "--dtype", "float64", "--val-data", str(digits),
               "--output-dir", str(out)], timeout=120)
    assert res.rc == 0, res.stderr
    _held_out_scores_reach_tensorboard(out)
    res = run([PYTHON, "-c", CHECK, str(digits), str(out), "20", str(MODELS.parent)],
              timeout=120)
    assert res.rc == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["dtype"] == "float64" and got["spread"] > 0.1  # trained logits, not zeros
    assert got["gap"] == 0.0, got


def _held_out_scores_reach_tensorboard(out) -> None:
    """Each logged step's val_loss and val_accuracy, in metrics.jsonl and in TensorBoard."""
    import numpy as np
    scalars = tensorboard_scalars(out / "tensorboard")
    records = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 3, 6]
    for key in ("val_loss", "val_accuracy"):  # TensorBoard keeps float32
        assert set(scalars[key]) == {r["step"] for r in records}, key
        assert all(np.isclose(scalars[key][r["step"]], r[key], rtol=1e-6) for r in records)
    assert np.isclose(records[0]["val_loss"], records[0]["loss"], rtol=1e-12)  # same rows
