"""Which host went silent: after a collective failed with no rank reporting an error, ask each
host of the job whether it still answers on the network.

A host whose link is down (or whose kernel hangs) never closes its connections: its peers only
see a collective time out (Horovod's Gloo after HOROVOD_GLOO_TIMEOUT_SECONDS). A TCP connect to
any port of a live host is answered at once, accepted or refused; a silent one answers nothing.
"""
from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

PROBE_PORT = 22  # any port will do: only whether the host answers at all counts
PROBE_S = 3.0  # a live host on the cluster network answers in milliseconds
_hosts: list[str] = []  # every rank's hostname, in rank order, once start-up has gathered them


def remember(hosts: list[str]) -> None:
    """Keep the job's hostnames (rank order) for report()."""
    _hosts[:] = hosts


def answers(host: str) -> bool:
    """Whether host answers a TCP connect within PROBE_S (accepted or refused)."""
    try:
        with socket.create_connection((host, PROBE_PORT), timeout=PROBE_S):
            return True
    except ConnectionRefusedError:
        return True
    except OSError:  # timed out, no route, unknown name: nothing answered
        return False


def silent_hosts(rank: int) -> dict[str, list[int]]:
    """The other hosts of the job that no longer answer, each with its ranks."""
    if not 0 <= rank < len(_hosts):
        return {}
    others = sorted(set(_hosts) - {_hosts[rank]})
    with ThreadPoolExecutor(max(1, len(others))) as pool:
        silent = [h for h, ok in zip(others, pool.map(answers, others)) if not ok]
    return {h: [r for r, x in enumerate(_hosts) if x == h] for h in silent}


def report(rank: int, silent: dict[str, list[int]]) -> str | None:
    """The one line naming the silent hosts, for the lowest rank on a host that answers (the
    one that says it); None for every other rank."""
    if rank != min(r for r, h in enumerate(_hosts) if h not in silent):
        return None
    named = ", ".join(f"{h} (rank {','.join(map(str, ranks))})" for h, ranks in silent.items())
    return f"host {named} went silent: no answer on the network (link or host down)"
