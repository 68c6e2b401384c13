"""launch.sh: echoes the mpirun command it runs, passes flags through, refuses bad knobs."""
from __future__ import annotations

import pytest

from conftest import PLATFORM, ROOT, launch_cmd, mpirun_family, run

LAUNCH = str(ROOT / "launch.sh")


@PLATFORM
def test_echoes_the_command_and_passes_arguments_through() -> None:
    res = run(launch_cmd("launch.sh", 3, "--help"), timeout=60)
    assert res.rc == 0, res.stderr
    echoed = [ln for ln in res.stderr.splitlines() if ln.startswith("+ ")]
    assert len(echoed) == 1
    flags = {"openmpi": ("-np 3", "--bind-to none", "--map-by slot"), "mpich": ("-n 3",),
             "impi": ("-n 3", "-genv I_MPI_PIN off")}[mpirun_family()]  # Hydra's flags
    for part in (*flags, "train.py --help"):
        assert part in echoed[0], echoed[0]
    assert res.stdout.count("usage: train.py") == 1  # three ranks, one help text


@PLATFORM
def test_runs_a_short_job_with_a_hostfile(tmp_path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# this machine only\nlocalhost slots=2\n")
    res = run(launch_cmd("launch.sh", 2, "--steps", "20", "--log-every", "10"),
              env={"HOSTFILE": str(hostfile)}, timeout=120)
    assert res.rc == 0, res.stderr
    # Open MPI reads the file; Hydra gets it rewritten as host:slots lines
    assert (f"--hostfile {hostfile}" if mpirun_family() == "openmpi" else " -f ") in res.stderr
    assert [ln.split()[1] for ln in res.stdout.splitlines() if ln.startswith("step")] == \
        ["0", "10", "20"]


@pytest.mark.fast
def test_dry_run_inside_a_slurm_allocation_uses_the_allocation() -> None:
    res = run([LAUNCH, "--dry-run", "--steps", "7"],
              env={"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "6"}, timeout=30)
    assert res.rc == 0, res.stderr
    (echoed,) = [ln for ln in res.stderr.splitlines() if ln.startswith("+ ")]
    assert "-np 6" in echoed and echoed.endswith("train.py --steps 7")
    assert "--hostfile" not in echoed and "--oversubscribe" not in echoed
    assert res.stdout == ""  # printed, not run


@pytest.mark.fast
def test_dry_run_hostfile_wins_over_the_allocation(tmp_path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=4\n")  # launch.sh checks that the name resolves
    res = run([LAUNCH, "--dry-run"], env={"SLURM_JOB_ID": "1", "SLURM_NTASKS": "6",
                                         "HOSTFILE": str(hostfile), "NP": "4"}, timeout=30)
    assert res.rc == 0, res.stderr
    (echoed,) = [ln for ln in res.stderr.splitlines() if ln.startswith("+ ")]
    assert "-np 4" in echoed and f"--hostfile {hostfile}" in echoed


@pytest.mark.fast
def test_dry_run_on_one_machine_oversubscribes() -> None:
    env = {"SLURM_JOB_ID": "", "NP": "5"}
    res = run([LAUNCH, "--dry-run"], env=env, timeout=30)
    (echoed,) = [ln for ln in res.stderr.splitlines() if ln.startswith("+ ")]
    assert "-np 5" in echoed and "--oversubscribe" in echoed
