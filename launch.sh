#!/usr/bin/env bash
# Launch train.py over MPI with the flags Horovod recommends for Open MPI.
#   ./launch.sh [train.py flags...]                  NP ranks on this machine (default 2)
#   HOSTFILE=hostfile NP=8 ./launch.sh --steps 5000  ranks spread over the hosts of a hostfile
# Knobs: NP, HOSTFILE (format: hostfile.example), PYTHON, MPIRUN, MPIRUN_ARGS (extra mpirun flags).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NP=${NP:-2}
HOSTFILE=${HOSTFILE:-}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS:-}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x "$here/.venv/bin/python" ] && PYTHON=$here/.venv/bin/python
fi

die() { echo "launch.sh: error: $*" >&2; exit 2; }

[[ "$NP" =~ ^[1-9][0-9]*$ ]] || die "NP must be a positive integer, got '$NP'"
command -v "$MPIRUN" >/dev/null || die "$MPIRUN not found (run 'make setup' or install Open MPI)"

# -bind-to none: Horovod and TensorFlow run their own threads, which core binding would pile
# onto one core. -map-by slot: fill each host's slots in turn. ob1 and no openib: Horovod's
# advice for Open MPI (openib is obsolete and warns or hangs on machines without InfiniBand).
cmd=("$MPIRUN" -np "$NP" -bind-to none -map-by slot -mca pml ob1 -mca btl '^openib')
if [ -n "$HOSTFILE" ]; then
    [ -r "$HOSTFILE" ] || die "hostfile '$HOSTFILE' not found or not readable"
    cmd+=(--hostfile "$HOSTFILE")
else
    cmd+=(--oversubscribe)  # one machine: allow more ranks than cores (the pools are sized)
fi
[ "$(id -u)" -eq 0 ] && cmd+=(--allow-run-as-root)
# Pass the environment the ranks need on every host (-x NAME exports NAME's value here).
for var in PATH LD_LIBRARY_PATH PYTHONPATH OMP_NUM_THREADS TF_CPP_MIN_LOG_LEVEL \
           $(compgen -e | grep -E '^(HOROVOD|NCCL)_' || true); do
    [ -n "${!var:-}" ] && cmd+=(-x "$var")
done
read -r -a extra <<<"$MPIRUN_ARGS"
cmd+=("${extra[@]}" "$PYTHON" "$here/train.py" "$@")

echo "+ ${cmd[*]}" >&2
exec "${cmd[@]}"
