#!/usr/bin/env bash
# On a machine with GPUs, after `make setup GPU=1`: one rank per local GPU, each pinned to the GPU
# of its local rank (dptrain/ranks/distributed.py), for the seed job and the digits Keras example;
# each compared with the same job on the same number of ranks on the CPU.
#   bash scripts/gpu_check.sh            # every local GPU; NP=2 for two of them
# It checks, and prints the figures:
#   1. the build: `horovodrun --check-build` lists NCCL;
#   2. pinning: rank r sees exactly one GPU, and no two ranks share one;
#   3. the seed job (float64, 300 full-batch steps): every logged loss within 1e-9 relative of
#      the CPU run's (only the order of float64 sums may differ);
#   4. the digits CNN (float32, adam, 3 epochs): every logged loss within 2% of the CPU run's
#      (cuDNN's convolutions round differently), final accuracy within 0.02.
# Knobs: NP (default: the GPU count), OUT (default: a temporary folder, removed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=$ROOT/.venv/bin/python
HVDRUN=$ROOT/.venv/bin/horovodrun
die() { echo "gpu_check: error: $*" >&2; exit 2; }
log() { echo "gpu_check: $*"; }

[ -x "$PY" ] || die "no .venv: run 'make setup GPU=1' first"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
gpus=$(nvidia-smi -L | grep -c '^GPU ' || true)
[ "$gpus" -ge 1 ] || die "nvidia-smi lists no GPU"
NP=${NP:-$gpus}
[ "$NP" -le "$gpus" ] || die "NP=$NP is more than the $gpus GPUs here"
TF_CPP_MIN_LOG_LEVEL=3 "$HVDRUN" --check-build | grep -q '\[X\] NCCL' ||
    die "this Horovod has no NCCL: run 'make setup GPU=1'"
log "1. build: NCCL built in; $gpus GPU(s), $NP rank(s)"
export TF_CPP_MIN_LOG_LEVEL=2 TF_DETERMINISTIC_OPS=1
if [ -z "${OUT:-}" ]; then OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT; fi
mkdir -p "$OUT"

# 2. Which GPU each rank ends up with, by the job's own pinning code.
"$HVDRUN" -np "$NP" "$PY" -c '
import horovod.tensorflow as hvd, tensorflow as tf
from dptrain.ranks import distributed
hvd.init()
distributed._pin_device(hvd.local_rank())
print("pinned", hvd.rank(), [d.name for d in tf.config.get_visible_devices("GPU")], flush=True)
' >"$OUT/pinning.txt" 2>&1 || { cat "$OUT/pinning.txt"; die "the pinning run failed"; }

run_both() {  # run_both NAME train.py-flags...: the job on the GPUs, then on the CPU
    local name=$1; shift
    "$HVDRUN" -np "$NP" "$PY" "$ROOT/train.py" "$@" --metrics "$OUT/$name-gpu.jsonl" \
        >"$OUT/$name-gpu.log" 2>&1 || { tail -n 20 "$OUT/$name-gpu.log"; die "$name on GPU failed"; }
    CUDA_VISIBLE_DEVICES="" "$HVDRUN" -np "$NP" "$PY" "$ROOT/train.py" "$@" \
        --metrics "$OUT/$name-cpu.jsonl" >"$OUT/$name-cpu.log" 2>&1 ||
        { tail -n 20 "$OUT/$name-cpu.log"; die "$name on CPU failed"; }
}
run_both seed --steps 300 --dtype float64 --seed 7
"$PY" "$ROOT/examples/digits_data.py" "$OUT/digits.npz" >/dev/null
run_both digits --data "$OUT/digits.npz" --model "$ROOT/examples/digits_model.py:cnn" \
    --loss crossentropy --optimizer adam --lr 0.01 --batch-size 128 --epochs 3 --log-every 10

"$PY" - "$OUT" "$NP" <<'PYTHON'
import ast, json, re, sys
out, np_ = sys.argv[1], int(sys.argv[2])
pinned = {}
for line in open(f"{out}/pinning.txt"):
    m = re.search(r"pinned (\d+) (\[.*\])", line)
    if m:
        pinned[int(m.group(1))] = ast.literal_eval(m.group(2))
ok = len(pinned) == np_ and all(len(d) == 1 for d in pinned.values()) and \
    len({d[0] for d in pinned.values()}) == np_
print(f"gpu_check: 2. pinning: {pinned} -> {'ok' if ok else 'FAILED'}")
def losses(name, where):
    return [json.loads(l) for l in open(f"{out}/{name}-{where}.jsonl")]
def gap(a, b):
    return max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b))
seed_g, seed_c = losses("seed", "gpu"), losses("seed", "cpu")
g = gap(seed_g, seed_c)
seed_ok = len(seed_g) == len(seed_c) and g <= 1e-9
print(f"gpu_check: 3. seed job: {len(seed_g)} losses, largest relative gap {g:.1e} (bound 1e-9)"
      f" -> {'ok' if seed_ok else 'FAILED'}")
dg, dc = losses("digits", "gpu"), losses("digits", "cpu")
g, acc = gap(dg, dc), abs(dg[-1]["accuracy"] - dc[-1]["accuracy"])
digits_ok = len(dg) == len(dc) and g <= 0.02 and acc <= 0.02
print(f"gpu_check: 4. digits CNN: {len(dg)} losses, largest relative gap {g:.1e} (bound 2e-2); "
      f"final accuracy {dg[-1]['accuracy']:.4f} GPU, {dc[-1]['accuracy']:.4f} CPU"
      f" -> {'ok' if digits_ok else 'FAILED'}")
sys.exit(0 if ok and seed_ok and digits_ok else 1)
PYTHON
