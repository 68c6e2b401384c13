"""One benchmark of this project against the alternatives, on the seed job and a large job.

Competitors (each computes the same full-batch descent from the same initial weights; the
final losses are checked to agree): plain TensorFlow in one process (the baseline), this
project (train.py) at P=1 and at P=2 over MPI and over Gloo, MultiWorkerMirroredStrategy at
P=2, and a NumPy + mpi4py step at P=2 (the floor). Each job also runs its tuning ladder:
the P=2 project job with Horovod's defaults, then with each tuned setting added in turn.
Runs are interleaved round by round, so drift of the machine hits all alike. Per-step times
are the mean of each log interval (the loss evaluations left out), pooled over the rounds.

    make bench                      # = .venv/bin/python bench/compare.py
    .venv/bin/python bench/compare.py --rounds 1 --large-n 1000000   # a quicker look

Writes bench/results/compare.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

import launchers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Job:
    name: str
    n: int
    steps: int
    log_every: int


@dataclass(frozen=True)
class Competitor:
    name: str
    ranks: int
    program: str  # "train" (this project), or a bench script
    launcher: str  # python | mpirun | gloo | mwms
    env: dict = field(default_factory=dict)
    flags: tuple = ()


BASELINE = Competitor("TensorFlow, one process (baseline)", 1, "baseline_tf.py", "python")
P1 = Competitor("dptrain P=1", 1, "train", "python")
P2 = Competitor("dptrain P=2 MPI", 2, "train", "mpirun")
MWMS = Competitor("MultiWorkerMirroredStrategy P=2", 2, "mwms.py", "mwms")
MWMS_XLA = Competitor("MultiWorkerMirroredStrategy P=2, loss under XLA", 2, "mwms.py", "mwms",
                      flags=("--xla",))
COMPETITORS = [BASELINE, P1, P2, Competitor("dptrain P=2 Gloo", 2, "train", "gloo"), MWMS,
               Competitor("NumPy + mpi4py P=2 (floor)", 2, "numpy_mpi.py", "mpirun")]
EXTRA = {"large": [MWMS_XLA]}  # what train.py does by default for long steps, done to MWMS
ONE_CALL = ("--steps-per-call", "1")
NO_XLA = ("--xla", "off")
LADDERS = {  # P=2 over MPI, from Horovod's defaults to this project's (P2, the last rung)
    "seed": [
        Competitor("Horovod defaults, one call per step", 2, "train", "mpirun",
                   {"HOROVOD_CYCLE_TIME": "1", "OMPI_MCA_mpi_yield_when_idle": "0"}, ONE_CALL),
        Competitor("+ Open MPI yields when idle", 2, "train", "mpirun",
                   {"HOROVOD_CYCLE_TIME": "1", "OMPI_MCA_mpi_yield_when_idle": "1"}, ONE_CALL),
        Competitor("+ HOROVOD_CYCLE_TIME 0.05 ms", 2, "train", "mpirun",
                   {"HOROVOD_CYCLE_TIME": "0.05", "OMPI_MCA_mpi_yield_when_idle": "1"}, ONE_CALL),
    ],  # + all steps between two logs in one compiled call: P2 itself
    "large": [  # Horovod's 1-ms cycle stays (long step); + XLA: P2 itself
        Competitor("Open MPI yields when idle, no XLA", 2, "train", "mpirun", {}, NO_XLA),
    ],
}
LADDER = [c for rungs in LADDERS.values() for c in rungs]


def run_one(c: Competitor, job: Job, init: str, tmp: str) -> dict:
    """One run: its per-interval step times, final loss and each rank's peak RSS."""
    prefix = os.path.join(tmp, f"{job.name}-{time.monotonic_ns()}")
    common = ["--n-points", str(job.n), "--steps", str(job.steps), "--log-every",
              str(job.log_every), "--init-weights", init]
    if c.program == "train":
        argv = [os.path.join(ROOT, "bench", "peak_rss.py"), os.path.join(ROOT, "train.py"),
                *common, "--metrics", prefix + ".jsonl", "--progress", "off", *c.flags]
    else:
        argv = [os.path.join(ROOT, "bench", c.program), *common, "--out", prefix, *c.flags]
    env = c.env | {"PEAK_RSS_PREFIX": prefix}
    launchers.launch(c.launcher, c.ranks, argv, env, timeout=600)
    ranks = [json.load(open(f"{prefix}-rank{r}.json")) for r in range(c.ranks)]
    if c.program == "train":
        records = [json.loads(line) for line in open(prefix + ".jsonl")]
        times = [r["sec_per_step"] for r in records if r["sec_per_step"] is not None]
        final = records[-1]["loss"]
    else:
        times, final = ranks[0]["sec_per_step"], ranks[0]["final_loss"]
    return {"times": times, "final_loss": final, "rss": [r["peak_rss_mb"] for r in ranks]}


def run_all(jobs: list[Job], rounds: int, init: str, tmp: str) -> dict:
    """Every (job, competitor) in each round, interleaved; pooled results."""
    results: dict = {}
    for rnd in range(rounds):
        for job in jobs:
            field_ = COMPETITORS + EXTRA.get(job.name, []) + LADDERS.get(job.name, [])
            shift = rnd % len(field_)  # a different order each round
            for c in field_[shift:] + field_[:shift]:
                t = time.perf_counter()
                r = run_one(c, job, init, tmp)
                print(f"  round {rnd + 1} {job.name:5s} {c.name:38s} "
                      f"{np.median(r['times']) * 1e3:9.3f} ms/step  ({time.perf_counter() - t:4.1f} s)",
                      flush=True)
                pool = results.setdefault((job.name, c.name), {"times": [], "losses": [],
                                                               "rss": []})
                pool["times"] += r["times"]
                pool["losses"].append(r["final_loss"])
                pool["rss"].append(max(r["rss"]))
    return results


def summarize(results: dict, jobs: list[Job]) -> list[dict]:
    """One row per (job, competitor): median and spread of the step, ratios, RSS, loss."""
    rows = []
    for job in jobs:
        base = np.median(results[(job.name, BASELINE.name)]["times"])
        for (name, cname), pool in results.items():
            if name != job.name:
                continue
            t = np.array(pool["times"])
            med = float(np.median(t))
            rows.append({"job": name, "competitor": cname, "ranks": _ranks(cname),
                         "step_median_s": med, "step_p10_s": float(np.percentile(t, 10)),
                         "step_p90_s": float(np.percentile(t, 90)), "samples": int(t.size),
                         "samples_per_s": jobs_n(jobs, name) / med,
                         "step_vs_baseline": med / base,
                         "peak_rss_mb": max(pool["rss"]), "final_loss": pool["losses"][-1],
                         "losses": pool["losses"], "ladder": cname in {c.name for c in LADDER}})
    return rows


def _ranks(name: str) -> int:
    return next(c.ranks for c in COMPETITORS + [MWMS_XLA] + LADDER if c.name == name)


def jobs_n(jobs: list[Job], name: str) -> int:
    return next(j.n for j in jobs if j.name == name)


def _ms(s: float) -> str:
    ms = s * 1e3
    return f"{ms:.3f}" if ms < 10 else f"{ms:.0f}"


def table(rows: list[dict], ladder: bool) -> list[str]:
    """Markdown table of the competitors (or of the tuning ladder)."""
    if ladder:  # per job, Horovod's defaults first, this project's defaults (P2) last
        rows = sorted((r for r in rows if r["ladder"] or r["competitor"] == P2.name),
                      key=lambda r: (r["job"] != "seed", r["competitor"] == P2.name))
    out = ["| job | run | P | step ms, median | p10–p90 | samples/s | step ÷ baseline | "
           "peak RSS/rank MB | final loss |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["ladder"] and not ladder:
            continue
        out.append(f"| {r['job']} | {r['competitor']} | {r['ranks']} | {_ms(r['step_median_s'])} "
                   f"| {_ms(r['step_p10_s'])}–{_ms(r['step_p90_s'])} | {r['samples_per_s']:.3g} "
                   f"| {r['step_vs_baseline']:.2f} | {r['peak_rss_mb']:.0f} "
                   f"| {r['final_loss']:.10e} |")
    return out


def checks(rows: list[dict]) -> tuple[list[str], bool]:
    """The issue's targets and the loss agreement, as lines; and whether the losses agree."""
    get = {(r["job"], r["competitor"]): r for r in rows}
    lines = []
    seed_ratio = get[("seed", P2.name)]["step_vs_baseline"]
    lines.append(f"seed job, P=2 step / baseline step = {seed_ratio:.2f} (target <= 1.5): "
                 f"{'met' if seed_ratio <= 1.5 else 'MISSED'}")
    if ("large", P2.name) in get:
        ratio = get[("large", P2.name)]["samples_per_s"] / get[("large", P1.name)]["samples_per_s"]
        lines.append(f"large job, P=2 throughput / P=1 throughput = {ratio:.2f} (target >= 0.9): "
                     f"{'met' if ratio >= 0.9 else 'MISSED'}")
    for job in sorted({r["job"] for r in rows}):
        for other in (MWMS, MWMS_XLA):
            if (job, other.name) not in get:
                continue
            mine, theirs = get[(job, P2.name)], get[(job, other.name)]
            ratio = mine["step_median_s"] / theirs["step_median_s"]
            verdict = (f"(target <= 1): {'met' if ratio <= 1 else 'MISSED'}" if other is MWMS
                       else "(no target: MWMS given train.py's XLA default, for reference)")
            lines.append(f"{job} job, P=2 step / {other.name} step = {ratio:.2f} {verdict}")
    agree = True
    for job in sorted({r["job"] for r in rows}):
        ref = get[(job, BASELINE.name)]["final_loss"]
        worst = max(abs(loss - ref) / abs(ref) for r in rows if r["job"] == job
                    for loss in r["losses"])
        agree &= worst <= 1e-9
        lines.append(f"{job} job: every run's final loss equals the baseline's to "
                     f"{worst:.1e} relative (required <= 1e-9)")
    return lines, agree


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=2, help="rounds: each runs every competitor once")
    p.add_argument("--large-n", type=int, default=10**7)
    p.add_argument("--large-steps", type=int, default=5)
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = p.parse_args()
    jobs = [Job("seed", 50, 2000, 50), Job("large", a.large_n, a.large_steps, 1)]
    sys.path.insert(0, ROOT)
    from dptrain.model import random_params
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.npz")
        np.savez(init, **random_params((1, 5, 1), 0, np.float64))
        rows = summarize(run_all(jobs, a.rounds, init, tmp), jobs)
    lines, agree = checks(rows)
    report = (["## Competitors", *table(rows, False), "", "## Tuning ladders (P=2, MPI)",
               *table(rows, True), "", "## Targets and checks", *[f"- {ln}" for ln in lines]])
    print("\n" + "\n".join(report))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "compare.md"), "w") as f:
        f.write("\n".join(report) + "\n")
    with open(os.path.join(a.out, "compare.json"), "w") as f:
        json.dump({"args": vars(a), "jobs": [vars(j) for j in jobs], "rows": rows,
                   "checks": lines, "cores": len(os.sched_getaffinity(0))}, f, indent=2)
    print(f"\nwrote {a.out}/compare.{{md,json}} in {time.perf_counter() - t0:.0f} s")
    sys.exit(0 if agree else 1)


if __name__ == "__main__":
    main()
