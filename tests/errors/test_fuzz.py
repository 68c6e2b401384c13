"""Loaders under fuzzing and hostile files: every damaged data file, weights file or checkpoint
gives a JobError (one line) or valid arrays, never another exception; nothing is unpickled;
outputs appear whole, with the user's umask, or not at all."""
from __future__ import annotations

import io
import os
import pathlib
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from conftest import ROOT
from dptrain.resume import checkpoint
from dptrain.data.source import open_source
from dptrain.errors import JobError
from dptrain.nets.builtin import Builtin, load_params
from dptrain.outputs.report import atomic_write

SEED_NET = Builtin((1, 5, 1), 0, "float64")  # the seed network's layout

pytestmark = pytest.mark.fast  # no launcher: in-process checks

FUZZ = settings(max_examples=120, deadline=5000,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def valid_bytes(ext: str) -> bytes:
    """A small, valid data file of each format."""
    x = np.linspace(-2, 2, 6).reshape(-1, 1)
    buf = io.BytesIO()
    if ext == ".npy":
        np.save(buf, np.hstack([x, x * x]))
    elif ext == ".npz":
        np.savez(buf, x=x, y=x * x)
    else:
        return ("x,y\n" + "".join(f"{a},{a * a}\n" for a in x[:, 0])).encode()
    return buf.getvalue()


@st.composite
def damaged(draw, original: bytes) -> bytes:
    """original with a few bytes flipped, cut short, or with junk spliced in."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "splice"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


def load_data(path: pathlib.Path) -> None:
    """What a rank does with --data: open, then read its rows; JobError is the only way out."""
    f = open_source(str(path), None, 0, np.float64)
    x, y = f.read(0, f.rows)
    assert x.shape == (f.rows, f.inputs) and y.shape == (f.rows, f.outputs)
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))


@pytest.mark.parametrize("ext", [".npy", ".npz", ".csv"])
def test_damaged_data_files_fail_cleanly_or_load_valid_rows(ext: str, tmp_path) -> None:
    @FUZZ
    @given(data=damaged(valid_bytes(ext)))
    def check(data: bytes) -> None:
        path = tmp_path / f"fuzz{ext}"
        path.write_bytes(data)
        try:
            load_data(path)
        except JobError as e:
            assert str(e).startswith(f"--data {path}: ") and "\n" not in str(e)
    check()


@FUZZ
@given(text=st.text(alphabet="xy,01.-e \n\tnaif", max_size=80))
def test_csv_of_arbitrary_text_fails_cleanly_or_loads(text: str, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(text)
    try:
        load_data(path)
    except JobError as e:
        assert str(e).startswith(f"--data {path}: ") and "\n" not in str(e)


def good_checkpoint(folder: pathlib.Path) -> tuple[str, dict]:
    params = oracle.draw_params(5, 3)
    meta = {"config": {}, "widths": [1, 5, 1], "ranks": 2, "optimizer": "sgd"}
    return checkpoint.save(str(folder), 10, params, {}, meta, 3), params


def test_damaged_checkpoints_are_refused_or_load_unchanged(tmp_path) -> None:
    path, params = good_checkpoint(tmp_path / "ok")
    original = pathlib.Path(path).read_bytes()

    @FUZZ
    @given(data=damaged(original))
    def check(data: bytes) -> None:
        bad = tmp_path / "bad" / "ckpt-000000010.npz"
        bad.parent.mkdir(exist_ok=True)
        bad.write_bytes(data)
        try:
            got, _, meta = checkpoint.load(str(bad))
        except JobError as e:
            assert "\n" not in str(e)
            return
        assert meta["step"] == 10  # it loaded: then it must be exactly what was saved
        for k, v in params.items():
            np.testing.assert_array_equal(got[k], v)
    check()


def test_damaged_weights_files_fail_cleanly(tmp_path) -> None:
    buf = io.BytesIO()
    np.savez(buf, **oracle.draw_params(5, 4))

    @FUZZ
    @given(data=damaged(buf.getvalue()))
    def check(data: bytes) -> None:
        path = tmp_path / "w.npz"
        path.write_bytes(data)
        try:
            got, _ = load_params(str(path), SEED_NET.check)
        except JobError as e:
            assert str(e).startswith(f"--init-weights {path}") and "\n" not in str(e)
            return
        assert all(np.all(np.isfinite(v)) for v in got.values())
    check()


class Payload:
    """Unpickling this creates the marker file: the proof that something ran pickle."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_pickled_payloads_are_never_unpickled(tmp_path) -> None:
    marker = tmp_path / "PWNED"
    evil = np.array([Payload(str(marker)), 1.0], dtype=object)
    np.save(tmp_path / "evil.npy", np.stack([evil, evil], axis=1), allow_pickle=True)
    np.savez(tmp_path / "evil.npz", x=evil, y=evil)
    np.savez(tmp_path / "evil-weights.npz", W1=evil)
    path, _ = good_checkpoint(tmp_path / "ck")
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    np.savez(path, **(arrays | {"param.W1": evil}))  # a checkpoint carrying the payload
    for load in (lambda: load_data(tmp_path / "evil.npy"), lambda: load_data(tmp_path / "evil.npz"),
                 lambda: load_params(str(tmp_path / "evil-weights.npz"),
                                         SEED_NET.check),
                 lambda: checkpoint.load(path)):
        with pytest.raises(JobError):
            load()
    assert not marker.exists(), "a loader unpickled the payload"


def test_every_np_load_in_the_package_refuses_pickle() -> None:
    for source in (ROOT / "dptrain").glob("*.py"):
        text = source.read_text()
        assert "import pickle" not in text and "pickle.load" not in text, source
        for line in re.findall(r".*np\.load\(.*", text):  # each call fits on its line
            assert "allow_pickle=False" in line, (source, line)


@settings(max_examples=40, deadline=2000)
@given(umask=st.sampled_from([0o022, 0o027, 0o077, 0o002]), fail_after=st.integers(0, 3))
def test_outputs_are_whole_with_the_users_umask_or_absent(umask: int, fail_after: int,
                                                          tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("out")
    target = folder / "weights.npz"
    chunks = [b"a" * 1000] * 4

    def write(f) -> None:
        for i, chunk in enumerate(chunks):
            if i == fail_after:
                raise OSError("disk full")
            f.write(chunk)

    old = os.umask(umask)
    try:
        with pytest.raises(OSError):
            atomic_write(str(target), write)
        assert os.listdir(folder) == []  # neither half a file nor a temporary left behind
        atomic_write(str(target), lambda f: f.write(b"".join(chunks)))
    finally:
        os.umask(old)
    assert target.read_bytes() == b"".join(chunks)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
