"""Bad input ends the whole job quickly: one line naming the problem, non-zero exit, no strays."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
from conftest import ROOT, run, save_npz

HANG_LIMIT = 60  # seconds; a job still running then counts as hung and is killed


def weights_file(tmp: Path, kind: str) -> Path:
    """An --init-weights file with one specific defect."""
    path = tmp / f"{kind}.npz"
    p = oracle.draw_params(5, 1)
    if kind == "missing":
        return path
    if kind == "malformed":
        path.write_text("W1,b1\n1,2\n")
        return path
    if kind == "wrong-shape":
        p["W2"] = np.ones((3, 1))
    elif kind == "nan":
        p["b1"][0, 2] = np.nan
    elif kind == "no-b2":
        del p["b2"]
    return save_npz(path, p)


FLAG_CASES = [
    (["--n-points", "0"], "--n-points must be >= 1"),
    (["--lr", "0"], "--lr must be a positive number"),
    (["--lr", "-0.5"], "--lr must be a positive number"),
    (["--lr", "nan"], "--lr must be a positive number"),
    (["--steps", "-1"], "--steps must be >= 0"),
    (["--hidden", "0"], "--hidden must be >= 1"),
    (["--log-every", "0"], "--log-every must be >= 1"),
    (["--steps", "ten"], "argument --steps: invalid int value"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
]
FILE_CASES = [
    ("missing", "no such file"),
    ("malformed", "not a readable .npz file"),
    ("wrong-shape", "W2 has shape (3, 1), expected (5, 1)"),
    ("nan", "b1 holds non-finite"),
    ("no-b2", "missing array b2"),
]


def assert_one_clean_error(res, expected: str) -> None:
    assert res.rc != 0
    lines = res.error_lines()
    assert len(lines) == 1, f"expected the error once, got {lines}\n{res.stderr}"
    assert expected in lines[0], lines[0]
    assert "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("flags,expected", FLAG_CASES)
def test_bad_flag_under_two_ranks(flags: list[str], expected: str) -> None:
    res = run([str(ROOT / "launch.sh"), *flags], env={"NP": "2"}, timeout=HANG_LIMIT)
    assert_one_clean_error(res, expected)
    assert res.rc == 2


@pytest.mark.parametrize("kind,expected", FILE_CASES)
def test_bad_init_weights_under_two_ranks(kind: str, expected: str, tmp_path) -> None:
    path = weights_file(tmp_path, kind)
    res = run([str(ROOT / "launch.sh"), "--init-weights", str(path), "--steps", "5"],
              env={"NP": "2"}, timeout=HANG_LIMIT)
    assert_one_clean_error(res, expected)
    assert str(path) in res.error_lines()[0]


def test_unwritable_output_dir_fails_cleanly(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    res = run([str(ROOT / "launch.sh"), "--output-dir", str(blocker / "out"), "--steps", "5"],
              env={"NP": "2"}, timeout=HANG_LIMIT)
    assert_one_clean_error(res, str(blocker))
