"""Where a P=2 step's time goes, from Horovod's own timeline (HOROVOD_TIMELINE).

For the seed job and the large job, runs train.py on 2 ranks with the timeline on and splits
the mean step into: waiting for the other rank (the NEGOTIATE span of the gradients: from the
first rank's request to the last one's), the MPI allreduce itself, and the rest (compute,
TensorFlow and Horovod dispatch, the background thread's cycle).

    .venv/bin/python bench/timeline.py      # also run by `make bench`; writes bench/results/timeline.md
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import defaultdict

import numpy as np

import launchers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = {"seed": ["--n-points", "50", "--steps", "1000", "--log-every", "50"],
        "large": ["--n-points", "10000000", "--steps", "4", "--log-every", "1"]}


def spans(path: str) -> dict[str, dict[str, list[float]]]:
    """tensor name -> span name -> durations (µs), from a Chrome-trace timeline file."""
    text = open(path).read().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("name") == "process_name" and "name" in e.get("args", {})}
    out: dict = defaultdict(lambda: defaultdict(list))
    stacks: dict = defaultdict(list)
    for e in events:
        if e.get("ph") == "B":
            stacks[e["pid"]].append((e["name"], e["ts"]))
        elif e.get("ph") == "E" and stacks[e["pid"]]:
            name, start = stacks[e["pid"]].pop()
            out[names.get(e["pid"], "?")][name].append(e["ts"] - start)
    return out


def measure(job: str, tmp: str) -> dict:
    """One timeline run: mean step, and its negotiation and allreduce parts."""
    timeline, metrics = os.path.join(tmp, f"{job}.json"), os.path.join(tmp, f"{job}.jsonl")
    launchers.launch("mpirun", 2, [os.path.join(ROOT, "train.py"), *JOBS[job], "--metrics",
                     metrics, "--progress", "off"], {"HOROVOD_TIMELINE": timeline}, 300)
    records = [json.loads(line) for line in open(metrics)]
    step_us = float(np.median([r["sec_per_step"] for r in records[1:]])) * 1e6
    grads = [s for name, s in spans(timeline).items() if "Gradient" in name]
    # The gradients go out together (fused): per step, the longest of their spans counts.
    negotiate = np.max([s["NEGOTIATE_ALLREDUCE"] for s in grads], axis=0)
    reduce = np.max([s["MPI_ALLREDUCE"] for s in grads], axis=0)
    return {"job": job, "step_us": step_us, "wait_us": float(np.median(negotiate)),
            "allreduce_us": float(np.median(reduce)), "steps_seen": int(len(reduce))}


def main() -> None:
    out = os.path.join(ROOT, "bench", "results")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(job, tmp) for job in JOBS]
    lines = ["| job (P=2, MPI) | step µs | waiting for the other rank µs | MPI allreduce µs "
             "| the rest µs |", "|---|---|---|---|---|"]
    for r in rows:
        rest = r["step_us"] - r["wait_us"] - r["allreduce_us"]
        lines.append(f"| {r['job']} | {r['step_us']:.0f} | {r['wait_us']:.0f} | "
                     f"{r['allreduce_us']:.0f} | {rest:.0f} |")
    print("\n".join(lines))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "timeline.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "timeline.json"), "w") as f:
        json.dump(rows, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
