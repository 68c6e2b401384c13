"""The job across two hosts for real: namespaces with sshd, TCP, launch.sh and horovodrun."""
from __future__ import annotations

import statistics
import time

import pytest

import oracle
from conftest import BIN, launch_cmd, read_metrics, relative_gap, run, save_npz
from netns_hosts import NIC, SUBNET, TwoHosts, missing_reason

STEPS = 500
JOB = ("--steps", str(STEPS), "--dtype", "float64")  # float64: compared to rounding (1e-9)
ACROSS = "ranks 2 on 2 hosts: h1 [0], h2 [1]"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    pair = TwoHosts(tmp_path_factory.mktemp("hosts"))
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    return save_npz(tmp_path_factory.mktemp("w") / "init.npz", oracle.draw_params(5, 5))


@pytest.fixture(scope="module")
def single(init, tmp_path_factory) -> list[dict]:
    metrics = tmp_path_factory.mktemp("single") / "m.jsonl"
    res = run(launch_cmd("none", 1, *JOB, "--init-weights", str(init),
                         "--metrics", str(metrics)))
    assert res.rc == 0, res.stderr
    return read_metrics(metrics)


def check_run(res, metrics, single, hosts) -> None:
    """Ran on both hosts, matched the one-process losses, left nothing behind."""
    assert res.rc == 0, res.stdout + res.stderr
    assert ACROSS in res.stdout, res.stdout
    got = read_metrics(metrics)
    assert [r["step"] for r in got] == [r["step"] for r in single]
    assert relative_gap([r["loss"] for r in got], [r["loss"] for r in single]) < 1e-9
    def ms(records: list[dict]) -> float:
        return statistics.median(r["sec_per_step"] for r in records[1:]) * 1e3
    print(f"two hosts: median {ms(got):.3f} ms/step; one process: {ms(single):.3f} ms/step")
    time.sleep(0.5)
    assert hosts.kill_jobs() == [], "processes left running on the hosts"


def test_launch_sh_with_a_hostfile(hosts, init, single, tmp_path) -> None:
    hostfile = tmp_path / "hostfile"
    # By address: launch.sh checks that each name resolves, and h1/h2 are names only in the
    # test's own ssh_config, which launch.sh does not read.
    hostfile.write_text("# hostfile.example format\n" + "".join(
        f"{hosts.addr[name]} slots=1\n" for name in ("h1", "h2")))
    metrics = tmp_path / "m.jsonl"
    # mpirun starts its daemons with the `ssh` on PATH: the test's wrapper, which reads the
    # test's ssh_config (Open MPI 5 ignores Open MPI 4's -mca plm_rsh_args).
    mpirun_args = f"-mca btl_tcp_if_include {SUBNET}.0/24 -mca oob_tcp_if_include {SUBNET}.0/24"
    res = run(launch_cmd("launch.sh", 2, *JOB, "--init-weights", str(init),
                         "--metrics", str(metrics)),
              env={"HOSTFILE": str(hostfile), "MPIRUN_ARGS": mpirun_args,
                   "PATH": f"{hosts.bin}:{BIN}:/usr/sbin:/usr/bin:/sbin:/bin"}, timeout=180)
    assert "--hostfile" in res.stderr and "-bind-to none" in res.stderr
    check_run(res, metrics, single, hosts)


@pytest.mark.parametrize("controller", ["--gloo", "--mpi"])
def test_horovodrun_across_hosts(controller, hosts, init, single, tmp_path) -> None:
    metrics = tmp_path / "m.jsonl"
    res = run(launch_cmd(f"horovodrun-{controller[2:]}", 2, *JOB,
                         "--init-weights", str(init), "--metrics", str(metrics),
                         options=("-H", "h1:1,h2:1", "--network-interface", NIC)),
              env={"PATH": f"{hosts.bin}:{BIN}:/usr/sbin:/usr/bin:/sbin:/bin"}, timeout=180)
    check_run(res, metrics, single, hosts)
