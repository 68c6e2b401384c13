"""The test plan's own machinery: under DPTRAIN_NO_SKIP=1 (CI) a skip is a failure."""
from __future__ import annotations

import pytest

from conftest import HELPERS, PYTHON, run

pytestmark = pytest.mark.fast  # one small pytest run, no launcher

SKIPPING = """
import pytest

def test_needs_something_missing():
    pytest.skip("no such thing on this machine")

def test_runs():
    pass
"""


@pytest.mark.parametrize("strict", ["1", ""])
def test_a_skip_fails_only_where_every_test_must_run(strict: str, tmp_path) -> None:
    (tmp_path / "test_x.py").write_text(SKIPPING)
    res = run([PYTHON, "-m", "pytest", "-q", "-p", "no_skip", "-p", "no:cacheprovider",
               str(tmp_path / "test_x.py")], cwd=tmp_path, timeout=60,
              env={"PYTHONPATH": str(HELPERS), "DPTRAIN_NO_SKIP": strict})
    if strict:
        assert res.rc == 1 and "1 failed, 1 passed" in res.stdout, res.stdout
        assert "skipped where DPTRAIN_NO_SKIP=1" in res.stdout
        assert "no such thing on this machine" in res.stdout  # the reason survives
    else:
        assert res.rc == 0 and "1 passed, 1 skipped" in res.stdout, res.stdout
