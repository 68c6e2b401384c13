"""The bad-input matrix of docs/failures.md, row by row: each input ends the whole job quickly
with the one line and exit code the table promises, no traceback and no process left behind."""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import oracle
from conftest import PLATFORM, ROOT, run, save_npz

HANG_LIMIT = 60  # seconds; a job still running then counts as hung and is killed
ERROR_LINE = re.compile(r"^(dptrain|launch\.sh|train\.sbatch): error: ")
PLACEHOLDER = re.compile(r"\{([\w.-]+)\}")
# The platform tier runs one row of each way a bad input reaches the user (which rank finds it,
# before or after Horovod starts, what the launcher does with the exit); the host runs them all.
PLATFORM_ROWS = {
    "2": "a flag every rank refuses before TensorFlow loads",
    "12": "mpi4py's world size (async mode)",
    "14": "a file rank 0 refuses after Horovod starts, the others waiting",
    "26": "a data error only rank 1 finds: the ranks agree, rank 1 reports",
    "34": "launch.sh's hostfile check (the resolver, ssh -G)",
    "36": "train.sbatch outside Slurm",
    "48": "a --model function that raises, once Keras 3 loads",
}


def matrix() -> list[tuple[str, str, str, int]]:
    """(number, command, expected line, exit code) of every row of the docs' table."""
    text = (ROOT / "docs" / "failures.md").read_text()
    table = text.split("<!-- bad-input matrix")[1].split("\n\n")[0]
    rows = []
    for line in table.splitlines():
        m = re.match(r"\| (\d+) \| [^|]+ \| `([^`]+)` \| `([^`]+)` \| (\d+) \|$", line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3), int(m.group(4))))
    return rows


def _weights(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        p = oracle.draw_params(5, 1)
        change(p)
        save_npz(path, p)
    return make


def _text(content: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(content)


def _npy(array: np.ndarray) -> Callable[[Path], None]:
    return lambda path: np.save(path, array, allow_pickle=True)


def _checkpoint_run(optimizer: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:  # what a 1-5-1 run with checkpoints leaves in --output-dir
        from dptrain.resume import checkpoint
        p = oracle.draw_params(5, 1)
        slots = {f"velocity.{k}": np.zeros_like(v) for k, v in p.items()} if optimizer != "sgd" else {}
        checkpoint.save(str(path / "checkpoints"), 10, p, slots, {
            "config": {}, "widths": [1, 5, 1], "ranks": 2, "optimizer": optimizer}, 3)
    return make


def _late_nan() -> np.ndarray:
    table = np.hstack([np.linspace(-2, 2, 10).reshape(-1, 1)] * 2)
    table[8, 1] = np.nan  # row 8 belongs to rank 1 of 2: rank 0 alone would never see it
    return table


USER_MODELS = """
import keras


def broken(input_shape, n_outputs):
    raise ValueError("no layers here")


def not_a_model(input_shape, n_outputs):
    return [keras.layers.Dense(n_outputs)]


def three_outputs(input_shape, n_outputs):
    return keras.Sequential([keras.Input(input_shape), keras.layers.Dense(3)])


def batch_norm(input_shape, n_outputs):
    return keras.Sequential([keras.Input(input_shape), keras.layers.BatchNormalization(),
                             keras.layers.Dense(n_outputs)])
"""

FILES: dict[str, Callable[[Path], None]] = {
    "a-file": _text("a file where a directory should be"),
    "missing.npz": lambda path: None,
    "text.npz": _text("W1,b1\n1,2\n"),
    "wrong-shape.npz": _weights(lambda p: p.update(W2=np.ones((3, 1)))),
    "nan.npz": _weights(lambda p: p["b1"].__setitem__((0, 2), np.nan)),
    "no-b2.npz": _weights(lambda p: p.pop("b2")),
    "pickled.npz": lambda path: np.savez(path, W1=np.array([{"exec": "payload"}], dtype=object)),
    "missing.npy": lambda path: None,
    "data.txt": _text("1,2\n"),
    "words.csv": _text("x,y\n1,2\n3,abc\n"),
    "ragged.csv": _text("x,y\n1,2\n3\n"),
    "data.csv": _text("x,y\n1,1\n2,4\n"),
    "flat.npy": _npy(np.arange(5.0)),
    "late-nan.npy": _npy(_late_nan()),
    "pickled.npy": _npy(np.array([{"exec": "payload"}, None], dtype=object)),
    "no-y.npz": lambda path: np.savez(path, x=np.zeros(4)),
    "data.npy": _npy(np.array([[0.0, 0.0], [1.0, 1.0]])),
    "run-1-5-1": _checkpoint_run("sgd"),
    "run-momentum": _checkpoint_run("momentum"),
    "missing.hosts": lambda path: None,
    "unknown.hosts": _text("localhost slots=1\nno-such-host.invalid slots=1\n"),
    "two-slots.hosts": _text("# two slots\nlocalhost slots=2\n"),
    "empty.csv": _text(""),
    "header-only.csv": _text("x,y\n"),
    "inf.csv": _text("x,y\n1,2\n3,inf\n"),
    "lengths.npz": lambda path: np.savez(path, x=np.zeros(4), y=np.zeros(3)),
    "garbage.npy": lambda path: path.write_bytes(b"\x93NUMPY garbage"),
    "missing.py": lambda path: None,
    "models.py": _text(USER_MODELS),
    "fractional.npz": lambda path: np.savez(path, x=np.zeros((3, 2)), y=np.array([0, 1, 2.5])),
    "negative.npz": lambda path: np.savez(path, x=np.zeros((3, 2)), y=np.array([0, -1, 2])),
    "missing.json": lambda path: None,
    "misspelt.yaml": _text("steps: 10\nstpes: 20\n"),
    "words.toml": _text('lr = 0.1\nsteps = "ten"\n'),
    "broken.json": _text('{"steps": 10,'),
    "wide.npy": _npy(np.zeros((4, 3))),
    "classes.npz": lambda path: np.savez(path, x=np.zeros((6, 2)), y=np.array([0, 1, 2] * 2)),
    "more-classes.npz": lambda path: np.savez(path, x=np.ones((4, 2)), y=np.array([0, 3, 1, 2])),
}


def materialise(text: str, tmp: Path) -> str:
    """Replace each {name} by the path of a freshly made file with that defect."""
    def path_of(m: re.Match) -> str:
        path = tmp / m.group(1)
        if not path.exists() and not path.is_symlink():
            FILES[m.group(1)](path)
        return str(path)
    return PLACEHOLDER.sub(path_of, text)


@pytest.mark.fast
def test_the_matrix_has_at_least_25_rows_with_distinct_commands() -> None:
    rows = matrix()
    assert len(rows) >= 25 and len({cmd for _, cmd, _, _ in rows}) == len(rows)
    assert set(PLATFORM_ROWS) <= {number for number, *_ in rows}  # no platform row lost


def rows() -> list:
    """matrix() as test parameters, PLATFORM_ROWS marked for the platform tier."""
    return [pytest.param(*row, marks=[PLATFORM] if row[0] in PLATFORM_ROWS else [])
            for row in matrix()]


@pytest.mark.parametrize("number,command,expected,code", rows(), ids=lambda v: str(v)[:40])
def test_bad_input_row(number: str, command: str, expected: str, code: int, tmp_path) -> None:
    words = shlex.split(materialise(command, tmp_path))
    env = {"NP": "2"}
    while "=" in words[0]:  # leading NAME=value words, as a shell would take them
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if words[0] == "./launch.sh":
        words[0] = str(ROOT / "launch.sh")
    res = run(words, env=env, timeout=HANG_LIMIT)
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ERROR_LINE.match(ln)]
    assert len(lines) == 1, f"row {number}: expected one error line, got {lines}\n{res.stderr}"
    assert materialise(expected, tmp_path) in lines[0], f"row {number}: {lines[0]}"
    assert res.rc == code, f"row {number}: exit {res.rc}\n{res.stderr}"
    assert "Traceback" not in res.stdout + res.stderr, res.stderr


def flag_rows() -> list:
    """The rows that are only flags (no files, no environment): the parser's own checks."""
    return [row for row in matrix() if row[1].startswith("./launch.sh ")
            and not PLACEHOLDER.search(row[1])]


@pytest.mark.fast
@pytest.mark.parametrize("number,command,expected,code", flag_rows(), ids=lambda v: str(v)[:40])
def test_flag_row_fails_in_the_parser(number: str, command: str, expected: str, code: int,
                                      capsys) -> None:
    """In process, before any rank starts: the same line and exit code from cli.parse."""
    from dptrain import cli
    with pytest.raises(SystemExit) as stop:
        cli.parse(shlex.split(command)[1:])
    assert stop.value.code == code, f"row {number}"
    (line,) = capsys.readouterr().err.splitlines()
    assert expected in line, f"row {number}: {line}"
