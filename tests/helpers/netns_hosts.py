"""Two test "hosts" on this machine: network namespaces on a private bridge, each running sshd.

Root side: a bridge with the test subnet's first address. Each host: a namespace whose veth
end carries the same name as the bridge (horovodrun's Gloo driver looks the NIC name up in
the launching namespace), its own hostname (unshare --uts), its own /etc/hosts bind-mounted in
its own mount namespace (Gloo resolves the host's own name), and an sshd with a throw-away host
key, authorized key and pid file. Everything is removed by stop(); ~/.ssh is never touched.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

NIC = "dpt0"  # the bridge here and the NIC inside each namespace
SUBNET = "10.213.7"  # /24, exists only between this machine's namespaces
NAMES = ("h1", "h2")
TOOLS = ("ip", "unshare", "ssh", "ssh-keygen")


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


def missing_reason() -> str | None:
    """Why this machine cannot build the hosts, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    absent = [t for t in TOOLS if shutil.which(t) is None] + (
        [] if Path("/usr/sbin/sshd").exists() else ["sshd"])
    if absent:
        return f"not installed: {', '.join(absent)} (make test installs openssh-server and iproute2)"
    probe = sh("ip", "netns", "add", "dpt-probe", check=False)
    if probe.returncode != 0:
        return f"ip netns add refused: {probe.stderr.strip()}"
    sh("ip", "netns", "del", "dpt-probe", check=False)
    return None


class TwoHosts:
    """start() builds h1 and h2; ssh_config and addresses are then ready; stop() removes all."""

    def __init__(self, workdir: Path):
        self.d = workdir
        self.addr = {name: f"{SUBNET}.{11 + i}" for i, name in enumerate(NAMES)}
        self.ssh_config = workdir / "ssh_config"
        self.bin = workdir / "bin"  # holds an `ssh` that uses ssh_config, for horovodrun
        self.sshd: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        """Bridge, namespaces, keys, sshd per host; waits until ssh reaches each one."""
        self._remove_leftovers()
        self._network()
        self._keys()
        for name in NAMES:
            self._sshd(name)
        for name in NAMES:
            self._wait_ssh(name)

    def _network(self) -> None:
        sh("ip", "link", "add", NIC, "type", "bridge")
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", NIC)
        sh("ip", "link", "set", NIC, "up")
        for i, name in enumerate(NAMES):
            ns, here, there = f"dpt-{name}", f"dptv{i}", f"dptp{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
            sh("ip", "link", "set", there, "netns", ns)
            sh("ip", "-n", ns, "link", "set", there, "name", NIC)
            sh("ip", "link", "set", here, "master", NIC, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[name]}/24", "dev", NIC)
            sh("ip", "-n", ns, "link", "set", NIC, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def _keys(self) -> None:
        self.bin.mkdir(parents=True, exist_ok=True)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.d / "id"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.d / "hostkey"))
        shutil.copy(self.d / "id.pub", self.d / "authorized_keys")
        hosts = "".join(f"Host {n}\n  HostName {a}\n" for n, a in self.addr.items())
        self.ssh_config.write_text(
            f"{hosts}Host *\n  User root\n  IdentityFile {self.d}/id\n  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
            "  BatchMode yes\n  ConnectTimeout 10\n")
        wrapper = self.bin / "ssh"
        wrapper.write_text(f"#!/bin/sh\nexec /usr/bin/ssh -F {self.ssh_config} \"$@\"\n")
        wrapper.chmod(0o755)
        (self.d / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
            f"{a} {n}\n" for n, a in self.addr.items()))

    def _sshd(self, name: str) -> None:
        conf = self.d / f"sshd_{name}.conf"
        conf.write_text(
            f"ListenAddress {self.addr[name]}\nHostKey {self.d}/hostkey\n"
            f"PidFile {self.d}/sshd_{name}.pid\nAuthorizedKeysFile {self.d}/authorized_keys\n"
            "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nMaxStartups 100\n"
            "MaxSessions 100\n")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        script = (f"hostname {name} && mount --bind {self.d}/hosts /etc/hosts && "
                  f"exec /usr/sbin/sshd -D -e -f {conf}")
        log = open(self.d / f"sshd_{name}.log", "wb")  # noqa: SIM115 (as long as sshd lives)
        self.sshd[name] = subprocess.Popen(
            ["ip", "netns", "exec", f"dpt-{name}", "unshare", "--uts", "--mount",
             "--propagation", "private", "sh", "-c", script],
            stdout=log, stderr=log, start_new_session=True)

    def _wait_ssh(self, name: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = sh("ssh", "-F", str(self.ssh_config), name, "hostname", check=False)
            if res.returncode == 0 and res.stdout.strip() == name:
                return
            if self.sshd[name].poll() is not None:
                log = (self.d / f"sshd_{name}.log").read_text()
                raise RuntimeError(f"sshd on {name} exited: {log}")
            time.sleep(0.3)
        raise TimeoutError(f"ssh to {name} not ready after {timeout}s")

    def kill_jobs(self) -> list[int]:
        """SIGKILL every process in the hosts' namespaces except sshd; return their PIDs."""
        keep = {p.pid for p in self.sshd.values()}
        killed = []
        for name in NAMES:
            res = sh("ip", "netns", "pids", f"dpt-{name}", check=False)
            for pid in map(int, res.stdout.split()):
                if pid not in keep:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    except ProcessLookupError:
                        pass
        return killed

    def stop(self) -> None:
        """Kill everything in the namespaces, sshd by PID, then remove namespaces and bridge."""
        self.kill_jobs()
        for proc in self.sshd.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        self.sshd.clear()
        self._remove_leftovers()

    def link(self, name: str, up: bool) -> None:
        """Take a host's network link down (it drops off the network, processes alive) or up."""
        sh("ip", "-n", f"dpt-{name}", "link", "set", NIC, "up" if up else "down")

    @staticmethod
    def _remove_leftovers() -> None:
        """Delete this fixture's namespaces, links and bridge, also those a crashed run left."""
        for i, name in enumerate(NAMES):
            sh("ip", "netns", "del", f"dpt-{name}", check=False)
            # A namespace outlives its name while sockets in it still retransmit (after a
            # link-down test): deleting the veth end here frees the name for the next start.
            sh("ip", "link", "del", f"dptv{i}", check=False)
        sh("ip", "link", "del", NIC, check=False)
