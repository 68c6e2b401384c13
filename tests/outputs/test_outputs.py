"""--output-dir: config, metrics and final weights, and the weights round-trip as --init-weights."""
from __future__ import annotations

import json

import numpy as np

import oracle
from conftest import PYTHON, launch_cmd, read_metrics, run, save_npz, tensorboard_scalars


def test_output_dir_holds_config_metrics_and_final_weights(tmp_path) -> None:
    p = oracle.draw_params(4, 9)
    init = save_npz(tmp_path / "init.npz", p)
    out = tmp_path / "run"
    cmd = launch_cmd("mpirun", 2, "--dtype", "float64", "--hidden", "4", "--n-points", "9",
                     "--steps", "120",
                     "--log-every", "40", "--init-weights", str(init), "--output-dir", str(out))
    res = run(cmd, timeout=120)
    assert res.rc == 0, res.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["hidden"] == [4] and config["steps"] == 120 and config["ranks"] == 2
    records = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 40, 80, 120]
    x, y = oracle.seed_data(9)
    expected = p
    for _ in range(120):
        g = oracle.gradient(expected, x, y)
        expected = {k: expected[k] - 0.01 * g[k] for k in expected}
    with np.load(out / "weights.npz", allow_pickle=False) as f:
        assert sorted(f.files) == ["W1", "W2", "b1", "b2"]
        for k in expected:
            np.testing.assert_allclose(f[k], expected[k], rtol=1e-10)
    # The final weights are a valid starting point: zero steps from them logs the final loss.
    res = run(launch_cmd("none", 1, "--dtype", "float64", "--hidden", "4", "--n-points", "9",
                         "--steps", "0",
                         "--init-weights", str(out / "weights.npz"), "--metrics",
                         str(tmp_path / "m0")))
    assert res.rc == 0, res.stderr
    (again,) = read_metrics(tmp_path / "m0")
    assert again["step"] == 0
    assert np.isclose(again["loss"], records[-1]["loss"], rtol=1e-12)


def test_console_figure_tensorboard_and_replot(tmp_path) -> None:
    """One 2-rank run: its console lines, fit.png, TensorBoard events, and a replot."""
    import matplotlib.image

    out = tmp_path / "run"
    res = run(launch_cmd("mpirun", 2, "--steps", "200", "--output-dir", str(out)), timeout=120)
    assert res.rc == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("step")]
    assert len(lines) == 5, res.stdout  # steps 0, 50, ..., 200, printed by rank 0 alone
    assert "ms/step" in lines[-1] and "ranks 2" in lines[-1] and "loss" in lines[-1]
    image = matplotlib.image.imread(out / "fit.png")  # decodes the PNG
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400
    assert image.std() > 0.05  # not a blank canvas

    scalars = tensorboard_scalars(out / "tensorboard")
    records = read_metrics(out / "metrics.jsonl")
    assert set(scalars["loss"]) == {r["step"] for r in records}
    for r in records:  # TensorBoard keeps float32
        assert np.isclose(scalars["loss"][r["step"]], r["loss"], rtol=1e-6)
    assert set(scalars["sec_per_step"]) == {r["step"] for r in records[1:]}

    (out / "fit.png").unlink()
    res = run([PYTHON, "-m", "dptrain.outputs.plot", str(out)], timeout=60)
    assert res.rc == 0, res.stderr
    assert res.stdout.strip() == str(out / "fit.png")
    assert matplotlib.image.imread(out / "fit.png").shape == image.shape


def test_replot_of_a_non_run_directory_fails_cleanly(tmp_path) -> None:
    res = run([PYTHON, "-m", "dptrain.outputs.plot", str(tmp_path)], timeout=60)
    assert res.rc == 2
    assert len(res.error_lines()) == 1 and "not a finished run directory" in res.stderr


def test_float32_run_converts_float64_weights_once_and_writes_float32(tmp_path) -> None:
    """--init-weights in float64 for a float32 run (the default): converted, said once for
    all ranks; every output and checkpoint then holds float32."""
    init = save_npz(tmp_path / "init.npz", oracle.draw_params(5, 3))
    out = tmp_path / "run"
    res = run(launch_cmd("mpirun", 2, "--steps", "20", "--checkpoint-every", "10",
                         "--init-weights", str(init), "--output-dir", str(out)), timeout=120)
    assert res.rc == 0, res.stderr
    said = (res.stdout + res.stderr).count("float64 arrays converted to float32 (--dtype)")
    assert said == 1, res.stderr
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    for path in [out / "weights.npz", *sorted((out / "checkpoints").glob("ckpt-*.npz"))]:
        with np.load(path, allow_pickle=False) as f:
            floats = {k: f[k].dtype for k in f.files if f[k].dtype.kind == "f"}
        assert floats and set(floats.values()) == {np.dtype(np.float32)}, (path, floats)
