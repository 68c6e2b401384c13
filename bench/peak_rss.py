"""Run a Python script as __main__ and print this process's peak RSS when it exits
(and write it to $PEAK_RSS_PREFIX-rankR.json when that is set).

    mpirun -np 2 python bench/peak_rss.py train.py --data big.npy --steps 2
"""
from __future__ import annotations

import atexit
import json
import os
import resource
import runpy
import sys


def report() -> None:
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("HOROVOD_RANK", "0"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    sys.stderr.write(f"peak_rss rank={rank} mb={peak_mb:.1f}\n")
    if os.environ.get("PEAK_RSS_PREFIX"):
        with open(f"{os.environ['PEAK_RSS_PREFIX']}-rank{rank}.json", "w") as f:
            json.dump({"peak_rss_mb": peak_mb}, f)


if __name__ == "__main__":
    script, sys.argv = sys.argv[1], sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    atexit.register(report)
    runpy.run_path(script, run_name="__main__")
