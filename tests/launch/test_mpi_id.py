"""Which MPI a banner names (scripts/mpi.sh), and the launch.sh command line for each family.

The banners are what these MPIs print, captured from them: `mpirun --version` (the launcher)
and MPI_Get_library_version (the library the set-up's mpicc builds with)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run

pytestmark = pytest.mark.fast  # no launcher runs: banners and --dry-run only

BANNERS = [  # (text, id)
    ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/",
     "openmpi 4.1.4"),
    ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022",
     "openmpi 4.1.4"),
    ("mpirun (Open MPI) 5.0.11", "openmpi 5.0.11"),
    ("HYDRA build details:\n    Version:                                 5.0.2\n"
     "    Release Date:                            Fri Sep 25 20:45:26 UTC 2026\n"
     "    Configure options:                       --with-device=ch4:ucx,ofi", "mpich 5.0.2"),
    ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026",
     "mpich 5.0.2"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.19.0 Build 20260929 (id: 1821d9b)\n"
     "Copyright 2003-2026, Intel Corporation.", "impi 2021.19.0"),
    ("Intel(R) MPI Library 2021.19.0 for Linux* OS", "impi 2021.19.0"),
    ("mpiexec: unrecognized option '--version'", "unknown ?"),
]


def mpi_sh(call: str) -> str:
    """The output of one scripts/mpi.sh function call, in bash."""
    return subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/mpi.sh"; {call}'],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("text,want", BANNERS)
def test_each_banner_names_its_mpi(text, want) -> None:
    assert mpi_sh(f"mpi_id_of {subprocess.list2cmdline([text])}") == want


def test_the_same_mpi_is_one_family_and_one_major_minor() -> None:
    same = mpi_sh('mpi_same "impi 2021.19" "impi 2021.19.0" && echo yes || echo no')
    other_family = mpi_sh('mpi_same "mpich 4.0.2" "openmpi 4.0.2" && echo yes || echo no')
    other_minor = mpi_sh('mpi_same "openmpi 4.1.4" "openmpi 5.0.11" && echo yes || echo no')
    unknown = mpi_sh('mpi_same "unknown ?" "unknown ?" && echo yes || echo no')
    assert (same, other_family, other_minor, unknown) == ("yes", "no", "no", "no")


def fake_launcher(tmp_path: Path, banner: str) -> Path:
    """A bin folder whose mpirun answers --version with the banner (launch.sh reads only that
    under --dry-run)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "mpirun").write_text(f"#!/bin/sh\ncat <<'EOF'\n{banner}\nEOF\n")
    (bin_ / "mpirun").chmod(0o755)
    return bin_


def dry_run(bin_: Path, **env: str) -> str:
    """launch.sh --dry-run's echoed command, with bin_ first on PATH."""
    res = run([str(ROOT / "launch.sh"), "--dry-run", "--steps", "7"],
              env={"PATH": f"{bin_}:/usr/bin:/bin", **env}, timeout=30)
    assert res.rc == 0, res.stderr
    (echoed,) = [ln for ln in res.stderr.splitlines() if ln.startswith("+ ")]
    return echoed


@pytest.mark.parametrize("banner,extra", [(BANNERS[3][0], ""), (BANNERS[5][0], " -genv I_MPI_PIN off")])
def test_hydra_gets_hydra_flags_and_a_hydra_hostfile(banner, extra, tmp_path) -> None:
    """MPICH's and Intel MPI's mpiexec: -n, -f with host:slots lines, none of Open MPI's flags
    (Hydra passes the whole environment itself and runs as root without being told)."""
    bin_ = fake_launcher(tmp_path, banner)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two names of this host\nlocalhost slots=2 max_slots=4\n\n127.0.0.1\n")
    echoed = dry_run(bin_, NP="3", HOSTFILE=str(hostfile))
    assert echoed.startswith(f"+ mpirun -n 3{extra} -f ") and echoed.endswith("train.py --steps 7")
    for flag in (" -x ", "-mca", "--oversubscribe", "--allow-run-as-root", "-bind-to"):
        assert flag not in echoed, echoed
    assert "-np 3" not in dry_run(bin_, NP="3")


def test_an_mpirun_of_no_known_mpi_is_one_line(tmp_path) -> None:
    bin_ = fake_launcher(tmp_path, BANNERS[-1][0])
    res = run([str(ROOT / "launch.sh"), "--dry-run"], env={"PATH": f"{bin_}:/usr/bin:/bin"},
              timeout=30)
    assert res.rc == 2 and res.stderr.strip().splitlines() == [
        "launch.sh: error: mpirun is neither Open MPI's mpirun nor a Hydra mpiexec (MPICH, "
        "Intel MPI): its --version names neither (set MPIRUN)"], res.stderr
