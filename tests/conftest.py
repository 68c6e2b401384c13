"""Shared test helpers: run real launcher processes with a hard timeout and leave none behind."""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # for the tests that load TensorFlow in-process
pytest_plugins = ["no_skip"]  # DPTRAIN_NO_SKIP=1 (CI): a skipped test fails
# The tiers (docs/testing.md): `fast` starts no launcher; `platform` is what the OS, Python, MPI
# or Horovod build can change, run on every platform CI checks; everything runs on the host.
PLATFORM = pytest.mark.platform
ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "tests" / "helpers"  # what the tests run or import besides themselves
PYTHON = sys.executable
BIN = Path(PYTHON).parent
TAG_VAR = "DPTRAIN_TEST_TAG"  # marks every process a test starts, to find stragglers by PID
TRAIN = ROOT / "train.py"
LAUNCHERS = ("none", "mpirun", "horovodrun-mpi", "horovodrun-gloo", "launch.sh")


def launch_cmd(launcher: str, np_: int, *args: str, script: Path = TRAIN,
               options: tuple[str, ...] = ()) -> list[str]:
    """The one way tests start ranks: `python script args` as np_ ranks under launcher (one of
    LAUNCHERS; "none" is one plain process), with the launcher's extra options."""
    program = [PYTHON, str(script), *args]
    if launcher == "none":
        assert np_ == 1 and not options, "a plain process is one rank"
        return program
    if launcher == "mpirun" and mpirun_family() == "openmpi":
        # more ranks than cores allowed; no rank pinned to one core
        return ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", "--map-by",
                "slot", *options, *program]
    if launcher == "mpirun":  # Hydra (MPICH, Intel MPI): oversubscribes and binds nothing,
        pin = ["-genv", "I_MPI_PIN", "off"] if mpirun_family() == "impi" else []  # but Intel
        return ["mpirun", "-n", str(np_), *pin, *options, *program]
    if launcher.startswith("horovodrun-"):
        return [str(BIN / "horovodrun"), f"--{launcher.split('-')[1]}", "-np", str(np_),
                *options, *program]
    if launcher == "launch.sh":  # mpirun through the cluster script, train.py only
        assert script == TRAIN and not options, "launch.sh runs train.py, knobs by env"
        return ["env", f"NP={np_}", str(ROOT / "launch.sh"), *args]
    raise ValueError(f"unknown launcher {launcher!r}")


def worker_errors(script: str, np_: int, out_dir: Path, timeout: float) -> dict:
    """Run tests/helpers/SCRIPT on np_ ranks under mpirun: the {check: largest error} its
    rank 0 wrote."""
    out = out_dir / "errors.json"
    res = run(launch_cmd("mpirun", np_, str(out), script=HELPERS / script), timeout=timeout)
    assert res.rc == 0, res.stdout + res.stderr
    return json.loads(out.read_text())


@functools.cache
def mpirun_family() -> str:
    """openmpi, mpich or impi: whose mpirun the jobs get (scripts/mpi.sh tells them apart)."""
    out = subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/mpi.sh"; mpi_launcher_id mpirun'],
                         env=job_env(), capture_output=True, text=True, check=True).stdout
    return out.split()[0]


def killed_rank_report(rank: int) -> str:
    """What the mpirun of mpirun_family() prints when rank `rank` dies of SIGKILL: Open MPI's
    sentence ("process rank R with PID N on node H exited on signal 9 (Killed)", wrapped by
    Open MPI 5: compare words), or the box of Hydra's mpiexec, which names the PID and host, not
    the rank, and whose signal line MPICH ("Killed (signal 9)") and Intel MPI ("KILLED BY
    SIGNAL: 9 (Killed)") word differently."""
    if mpirun_family() == "openmpi":
        return f"rank {rank} with PID"
    return "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"


@dataclass
class Result:
    """What a finished job left: exit code, output, wall time."""

    rc: int
    stdout: str
    stderr: str
    seconds: float

    def error_lines(self) -> list[str]:
        """Our one-line error reports, wherever they landed."""
        return [ln for ln in (self.stdout + self.stderr).splitlines() if "dptrain: error:" in ln]


def tagged_pids(tag: str) -> list[int]:
    """PIDs of live processes whose environment carries this tag."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{TAG_VAR}={tag}".encode() in env.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def kill_tagged(tag: str) -> list[int]:
    """SIGKILL every process carrying the tag (by PID); return the PIDs that were still alive."""
    alive = tagged_pids(tag)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return alive


def job_env(extra: dict | None = None) -> dict:
    """Environment for a job: the venv first on PATH, MPI allowed as root, quiet TensorFlow."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               # more ranks than cores: Open MPI 4 reads the first, Open MPI 5 (PRRTE) the second
               OMPI_MCA_rmaps_base_oversubscribe="1",
               PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def run(cmd: list[str], timeout: float = 120, env: dict | None = None,
        cwd: Path = ROOT) -> Result:
    """Run cmd to completion or kill its whole tree at `timeout`; fail on any leftover process."""
    tag = uuid.uuid4().hex
    env = job_env(env) | {TAG_VAR: tag}
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        kill_tagged(tag)
        out, err = proc.communicate()
        pytest.fail(f"timed out after {timeout}s: {' '.join(map(str, cmd))}\n{out}\n{err}")
    seconds = time.monotonic() - t0
    time.sleep(0.2)  # let exiting ranks be reaped before looking for stragglers
    leftovers = kill_tagged(tag)
    assert not leftovers, f"processes left running after {cmd}: {leftovers}"
    return Result(proc.returncode, out, err, seconds)


def read_metrics(path: Path) -> list[dict]:
    """The JSON-lines metrics file, one dict per logged step."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tensorboard_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} of every scalar in a TensorBoard folder's event files."""
    import tensorflow as tf
    scalars: dict[str, dict[int, float]] = {}
    for events in folder.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = float(
                    tf.make_ndarray(value.tensor))
    return scalars


def save_npz(path: Path, params: dict) -> Path:
    """Write an --init-weights file."""
    np.savez(path, **params)
    return path


def relative_gap(a: list[float], b: list[float]) -> float:
    """Largest |a - b| / |b| over paired values, |b| floored at 1e-12 of the largest |b|.

    The floor keeps a loss that has fallen to rounding level (a 1-point fit reaches 1e-30)
    from turning a 1e-40 absolute difference into a large relative one.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape, (a.shape, b.shape)
    floor = 1e-12 * np.max(np.abs(b))
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor)))


MODELS = ROOT / "examples" / "digits_model.py"  # the example Keras models (--model)
DIGIT_ROWS = 61  # uneven shards: 31 + 30 on 2 ranks, 21 + 20 + 20 on 3


@pytest.fixture(scope="module")
def slurm(tmp_path_factory, request):
    """A real one-node Slurm for the test module, claiming its SLURM_CPUS CPUs (default 4);
    stopped by PID afterwards, with nothing it started left running."""
    from slurm_cluster import LocalSlurm, missing_reason
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    tag = uuid.uuid4().hex
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"), job_env({TAG_VAR: tag}),
                         cpus=getattr(request.module, "SLURM_CPUS", 4))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        leftovers = kill_tagged(tag)  # job steps, ranks: anything the cluster started
        assert not leftovers, f"left running after the cluster stopped: {leftovers}"


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    """The first DIGIT_ROWS of scikit-learn's digits, written by the example's own script."""
    path = tmp_path_factory.mktemp("digits") / "digits.npz"
    res = run([PYTHON, str(ROOT / "examples" / "digits_data.py"), str(path), "--rows",
               str(DIGIT_ROWS)])
    assert res.rc == 0, res.stderr
    return path


@pytest.fixture(scope="session")
def mpirun() -> str:
    """Path of the mpirun the jobs get (Open MPI's, or a Hydra mpiexec)."""
    path = shutil.which("mpirun")
    if path is None:
        pytest.fail("mpirun not found: run 'make setup'")
    return path


@pytest.fixture(scope="session")
def hvd_single():
    """Horovod started in this test process as a world of one (once: TensorFlow's thread
    pools can be sized only before its runtime starts)."""
    from dptrain.ranks import distributed
    return distributed.start(cost=0)
