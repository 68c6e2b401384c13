"""--config: a run repeats from its own config.json bit for bit; YAML and TOML files of the
same keys mean the same; flags on the command line win; --mode and its older --elastic."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import PYTHON, TRAIN, read_metrics, run

pytestmark = pytest.mark.fast  # one plain process, or the parser in process

FLAGS = ["--steps", "60", "--log-every", "20", "--hidden", "7,3", "--lr", "0.03",
         "--optimizer", "adam", "--beta2", "0.99", "--batch-size", "16", "--seed", "3"]


def test_a_run_repeats_from_its_own_config_json_bit_for_bit(tmp_path) -> None:
    first, again = tmp_path / "first", tmp_path / "again"
    res = run([PYTHON, str(TRAIN), *FLAGS, "--output-dir", str(first)], timeout=90)
    assert res.rc == 0, res.stderr
    res = run([PYTHON, str(TRAIN), "--config", str(first / "config.json"), "--output-dir",
               str(again)], timeout=90)
    assert res.rc == 0, res.stderr
    losses = [[r["loss"] for r in read_metrics(d / "metrics.jsonl")] for d in (first, again)]
    assert len(losses[0]) == 4 and losses[0] == losses[1]  # floats from JSON: every bit
    with np.load(first / "weights.npz") as a, np.load(again / "weights.npz") as b:
        assert sorted(a) == sorted(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)
    configs = [json.loads((d / "config.json").read_text()) for d in (first, again)]
    assert configs[0].pop("output_dir") != configs[1].pop("output_dir")
    assert configs[0] == configs[1] and configs[0]["optimizer"] == "adam"


def _parse(argv: list[str]):
    from dptrain import cli
    return cli.parse(argv)


def test_yaml_toml_and_json_of_the_same_keys_give_the_same_config(tmp_path) -> None:
    settings = {"steps": 30, "lr": 0.1, "hidden": [4, 4], "shuffle": False, "mode": "sync"}
    (tmp_path / "c.json").write_text(json.dumps(settings))
    (tmp_path / "c.yaml").write_text("steps: 30\nlr: 0.1\nhidden: [4, 4]\nshuffle: false\n"
                                     "mode: sync\n")
    (tmp_path / "c.toml").write_text('steps = 30\nlr = 0.1\nhidden = [4, 4]\nshuffle = false\n'
                                     'mode = "sync"\n')
    configs = [_parse(["--config", str(tmp_path / f"c.{ext}")]) for ext in ("json", "yaml",
                                                                            "toml")]
    assert configs[0] == configs[1] == configs[2]
    c = configs[0]
    assert (c.steps, c.lr, c.hidden, c.shuffle) == (30, 0.1, (4, 4), False)
    assert c == _parse(["--steps", "30", "--lr", "0.1", "--hidden", "4,4", "--no-shuffle"])


def test_flags_on_the_command_line_win_over_the_file(tmp_path) -> None:
    (tmp_path / "c.yaml").write_text("steps: 30\nlr: 0.1\nbatch_size: 8\n")
    c = _parse(["--config", str(tmp_path / "c.yaml"), "--lr", "0.2", "--epochs", "3"])
    assert (c.lr, c.epochs, c.steps, c.batch_size) == (0.2, 3, None, 8)


def test_mode_elastic_and_its_older_spelling_are_one_mode(tmp_path, capsys) -> None:
    assert _parse(["--mode", "elastic"]).mode == "elastic"
    assert capsys.readouterr().err == ""
    assert _parse(["--elastic"]) == _parse(["--mode", "elastic"])
    assert capsys.readouterr().err.count("--elastic is the older spelling") == 1
    (tmp_path / "old.json").write_text('{"elastic": true, "steps": 5}')  # an older config.json
    assert _parse(["--config", str(tmp_path / "old.json")]).mode == "elastic"


USES = {  # argv that uses each option a mode may lack
    "optimizer": ["--optimizer", "adam"], "epochs": ["--epochs", "2"],
    "batch_size": ["--batch-size", "4"], "checkpoint_every": ["--checkpoint-every", "5"],
    "resume": ["--resume"], "checkpoint_on_signal": ["--checkpoint-on-signal"],
    "model": ["--model", "m.py:f"], "crossentropy": ["--loss", "crossentropy"],
    "accumulate": ["--accumulate", "2"], "compression": ["--compression", "fp16"],
    "val_data": ["--val-data", "v.npy"], "lr_schedule": ["--warmup", "5"],
    "weight_decay": ["--weight-decay", "0.01"], "clip_norm": ["--clip-norm", "1"]}
SCHEDULES = {"lr_schedule", "weight_decay", "clip_norm", "val_data"}
CHECKPOINTS = {"checkpoint_every", "resume", "checkpoint_on_signal"}
LACKS = {"sync": set(),  # what docs/flags.md promises each mode has not
         "elastic": CHECKPOINTS | SCHEDULES | {"batch_size", "model", "crossentropy",
                                               "accumulate", "compression"},
         "async": CHECKPOINTS | SCHEDULES | {"optimizer", "epochs", "model", "crossentropy",
                                             "accumulate", "compression"}}


@pytest.mark.parametrize("name", sorted(LACKS))
def test_the_parser_asks_each_mode_what_it_supports(name: str, tmp_path, capsys) -> None:
    """Each option the mode lacks is refused with the mode's line; the others parse."""
    from dptrain import cli, modes
    assert set(USES) == set(cli.OPTIONS)
    for option, argv in USES.items():
        argv = ["--mode", name, *argv, "--output-dir", str(tmp_path)]
        assert modes.declared(name).supports(option) == (option not in LACKS[name])
        if option in LACKS[name]:
            with pytest.raises(SystemExit) as stop:
                _parse(argv)
            assert stop.value.code == 2
            assert capsys.readouterr().err.startswith(f"dptrain: error: --mode {name} ")
        else:
            assert _parse(argv).mode == name
