"""train.sbatch's own logic where a real Slurm cannot time it: Slurm's commands (srun, scontrol)
and git are replaced by scripts that record what they were asked, and srun runs the job as one
process. The real-Slurm runs are tests/launch/test_slurm.py and tests/resume/test_requeue.py."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import PLATFORM, ROOT, TAG_VAR, job_env, kill_tagged

pytestmark = PLATFORM
JOB_ID = "4242"
# git (the provenance line's commit) waits, once it has said so, until the test has signalled
# the script: so the signal lands after the flags were checked and before srun starts.
FAKES = {
    "git": 'touch "$FAKE/in-git"; n=0\n'
           'while [ ! -e "$FAKE/signalled" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done\n'
           'echo fake',
    "srun": 'echo "DPTRAIN_STOP_SIGNAL=${DPTRAIN_STOP_SIGNAL:-}" > "$FAKE/srun-env"\n'
            'while [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"',  # its options dropped
    "scontrol": 'echo "$*" >> "$FAKE/scontrol-calls"',
}


def fake_commands(d: Path) -> Path:
    """A folder of the fake commands, to go first on PATH."""
    d.mkdir()
    for name, body in FAKES.items():
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)
    return d


def test_a_warning_before_srun_starts_is_passed_on_to_the_ranks(tmp_path) -> None:
    """SIGUSR1 while the script is still starting: the ranks get it from their start, stop at
    their first logged step with a checkpoint, and the job requeues itself."""
    fake, out, tag = fake_commands(tmp_path / "fake"), tmp_path / "out", os.urandom(6).hex()
    env = job_env({TAG_VAR: tag, "FAKE": str(fake), "PATH": f"{fake}:{os.environ['PATH']}",
                   "SLURM_JOB_ID": JOB_ID, "SLURM_JOB_NAME": "fake", "SLURM_JOB_NUM_NODES": "1",
                   "SLURM_JOB_NODELIST": "node0", "SLURM_NTASKS": "1",
                   "SLURM_SUBMIT_HOST": "login", "SLURM_SUBMIT_DIR": str(ROOT),
                   "SRUN_MPI": "pmix", "OUTPUT_DIR": str(out)})
    proc = subprocess.Popen(["bash", str(ROOT / "train.sbatch"), "--steps", "200",
                             "--dtype", "float64"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (fake / "in-git").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no provenance line"
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR1)
        (fake / "signalled").touch()
        log, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_tagged(tag)
    assert proc.returncode == 0, log
    assert "the ranks checkpoint and stop at their first logged step once they have started" in log
    assert (fake / "srun-env").read_text().strip() == "DPTRAIN_STOP_SIGNAL=SIGUSR1", log
    assert "stopped by SIGUSR1 after step 50 of 200" in log, log
    assert "the ranks stopped at the checkpoint of step 50 as planned" in log, log
    assert (out / "checkpoints" / "ckpt-000000050.npz").exists()
    assert (fake / "scontrol-calls").read_text().split() == ["requeue", JOB_ID], log
