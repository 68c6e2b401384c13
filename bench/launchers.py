"""Start a bench program on P ranks the way its users would, with a hard timeout."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

PYTHON = sys.executable
BIN = os.path.dirname(PYTHON)
MPIRUN = ["mpirun", "--bind-to", "none", "--map-by", "slot", "--mca", "pml", "ob1", "--mca", "btl",
          "^openib", "--oversubscribe"]  # launch.sh's flags for one machine
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def launch(kind: str, ranks: int, argv: list[str], env: dict, timeout: float) -> None:
    """Run argv (a Python script and its flags) on `ranks` ranks; exit on any failure."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **ROOT_OK, **env)
    if kind == "mwms":
        return _mwms(ranks, argv, env, timeout)
    cmd = {"python": [PYTHON],
           "mpirun": [*MPIRUN, "-np", str(ranks), PYTHON],
           "gloo": [os.path.join(BIN, "horovodrun"), "--gloo", "-np", str(ranks), "-H",
                    f"localhost:{ranks}", PYTHON],
           "horovodrun": [os.path.join(BIN, "horovodrun"), "-np", str(ranks), PYTHON]}[kind]
    _wait([_start(cmd + argv, env)], timeout)


def collect(prefix: str, ranks: int, train: bool) -> dict:
    """A finished run's results: seconds per step of each logged interval, the final loss and
    each rank's peak RSS (train.py logs to PREFIX.jsonl, a bench program to PREFIX-rankR.json,
    and bench/peak_rss.py writes train.py's RSS there too)."""
    per_rank = [json.load(open(f"{prefix}-rank{r}.json")) for r in range(ranks)]
    if train:
        records = [json.loads(line) for line in open(prefix + ".jsonl")]
        times = [r["sec_per_step"] for r in records if r["sec_per_step"] is not None]
        final = records[-1]["loss"]
    else:
        times, final = per_rank[0]["sec_per_step"], per_rank[0]["final_loss"]
    return {"times": times, "final_loss": final, "rss": [r["peak_rss_mb"] for r in per_rank]}


def _mwms(ranks: int, argv: list[str], env: dict, timeout: float) -> None:
    """One process per worker, each told the whole cluster through TF_CONFIG."""
    workers = [f"localhost:{port}" for port in _free_ports(ranks)]
    procs = [_start([PYTHON, *argv], env | {"TF_CONFIG": json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})})
        for i in range(ranks)]
    _wait(procs, timeout)


def _free_ports(count: int) -> list[int]:
    """Ports free on the loopback interface now (MWMS's gRPC servers listen there)."""
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _start(cmd: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # its own group, to kill whole


def _wait(procs: list[subprocess.Popen], timeout: float) -> None:
    """Wait for all; on a failure or the timeout kill every group and stop the bench."""
    outputs = None
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        pass
    finally:  # also on Ctrl-C: no rank outlives the bench
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # leftovers of a finished or failed run
            except ProcessLookupError:
                pass
    bad = outputs is None or any(p.returncode for p in procs)
    if bad:
        detail = "timed out" if outputs is None else "\n".join(o[-3000:] for o in outputs)
        sys.exit(f"bench: a run failed: {' '.join(procs[0].args)}\n{detail}")
