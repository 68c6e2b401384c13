"""The set-up script: a no-op once done, and a clear message when it may not install packages."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import ROOT, run

SETUP = str(ROOT / "scripts" / "setup.sh")


def test_rerun_is_a_no_op() -> None:
    # The suite runs after `make setup`, so the environment is already built.
    res = run(["bash", SETUP], timeout=120)
    assert res.rc == 0, res.stderr
    assert "setup: up to date" in res.stderr, res.stderr
    assert "building Horovod" not in res.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to become an unprivileged user")
def test_unprivileged_user_is_told_which_packages_to_install(tmp_path) -> None:
    tmp_path.chmod(0o777)
    res = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", SETUP],
              env={"APT_EXTRA": "dptrain-no-such-package", "VENV": str(tmp_path / "venv"),
                   "HOME": str(tmp_path)}, timeout=60)
    assert res.rc == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "setup: error: missing system packages: dptrain-no-such-package "
        "(run: sudo apt-get install -y dptrain-no-such-package)")
    assert not (tmp_path / "venv").exists()
