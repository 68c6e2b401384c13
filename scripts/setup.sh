#!/usr/bin/env bash
# One-command set-up: system MPI, .venv with the pins of requirements.txt, Horovod built with
# TensorFlow + MPI + Gloo (or taken from the wheel cache), verified by `horovodrun --check-build`.
# Re-running is a no-op once the stamp matches. Knobs: PYTHON, VENV, DPTRAIN_CACHE, APT_EXTRA.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3.11}
VENV=${VENV:-$ROOT/.venv}
CACHE=${DPTRAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dptrain}
REQS=$ROOT/requirements.txt
# Extra Debian packages a caller needs (the tests add Slurm, munge, sshd).
read -r -a APT_PKGS <<<"libopenmpi-dev openmpi-bin ${APT_EXTRA:-}"
# A conda environment (VENV=$CONDA_PREFIX) brings its own Open MPI.
[ -x "$VENV/bin/mpicc" ] && read -r -a APT_PKGS <<<"${APT_EXTRA:-}"
HVD_ENV=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
         HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1)

log() { echo "setup: $*" >&2; }
die() { echo "setup: error: $*" >&2; exit 1; }

pin() {  # pin NAME -> the version requirements.txt pins
    sed -n "s/^$1==\([^ ]*\).*/\1/p" "$REQS"
}

ensure_system_packages() {
    local missing=() p
    for p in "${APT_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        die "missing system packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})"
    fi
    log "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

stamp_key() {  # everything whose change must trigger a re-run
    { cat "$REQS" "${BASH_SOURCE[0]}"; "$PYTHON" -V; } | sha256sum | cut -c1-16
}

horovod_wheel_key() {  # the versions and build flags a Horovod binary depends on
    { echo "horovod==$(pin horovod) tensorflow-cpu==$(pin tensorflow-cpu)"
      printf '%s\n' "${HVD_ENV[@]}"; "$PYTHON" -V; uname -m
      mpirun --version 2>&1 | head -n1; c++ --version | head -n1; } | sha256sum | cut -c1-16
}

install_horovod() {
    local dir wheel tmp
    dir="$CACHE/horovod-$(pin horovod)-$(horovod_wheel_key)"
    wheel=$(ls "$dir"/horovod-*.whl 2>/dev/null | head -n1 || true)
    if [ -z "$wheel" ]; then
        log "building Horovod $(pin horovod) (a few minutes; cached in $dir)"
        tmp=$(mktemp -d)
        env "${HVD_ENV[@]}" TF_CPP_MIN_LOG_LEVEL=3 MAKEFLAGS="-j$(nproc)" "$VENV/bin/pip" wheel -q --no-build-isolation \
            --no-deps --no-cache-dir -w "$tmp" "horovod==$(pin horovod)"
        mkdir -p "$dir"
        mv "$tmp"/horovod-*.whl "$dir"/ && rm -rf "$tmp"
        wheel=$(ls "$dir"/horovod-*.whl | head -n1)
    else
        log "reusing cached Horovod wheel $wheel"
    fi
    "$VENV/bin/pip" install -q --no-deps --force-reinstall "$wheel"
}

check_build() {  # TensorFlow, MPI and Gloo must all show as built in
    local out want
    out=$(TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/horovodrun" --check-build)
    echo "$out" >&2
    for want in TensorFlow MPI Gloo; do
        grep -q "\[X\] $want" <<<"$out" || die "horovodrun --check-build lacks $want"
    done
}

main() {
    ensure_system_packages
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=/path/to/python3.11)"
    local key; key=$(stamp_key)
    if [ -f "$VENV/.setup-stamp" ] && [ "$(cat "$VENV/.setup-stamp")" = "$key" ]; then
        log "up to date ($VENV)"; return 0
    fi
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade "pip==24.3.1"
    # Everything but Horovod first: its build imports TensorFlow from this venv.
    grep -v '^horovod==' "$REQS" >"$VENV/requirements-no-horovod.txt"
    # mpi4py's wheel loads the system's libmpi at run time: the same Open MPI Horovod links to.
    "$VENV/bin/pip" install -q -r "$VENV/requirements-no-horovod.txt"
    install_horovod
    check_build
    echo "$key" >"$VENV/.setup-stamp"
    log "done: activate with 'source $VENV/bin/activate'"
}

main "$@"
