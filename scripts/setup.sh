#!/usr/bin/env bash
# One-command set-up: system MPI, .venv with the pins of requirements.txt, Horovod built from its
# sdist with third_party/horovod/patches/ applied (TensorFlow + MPI + Gloo; or taken from the
# wheel cache), verified by `horovodrun --check-build`. Re-running is a no-op once the stamp
# matches. Knobs: PYTHON, VENV, DPTRAIN_CACHE, APT_EXTRA, GPU (1: tensorflow[and-cuda] and Horovod
# with NCCL, against a CUDA_HOME whose nvcc is CUDA 12; docs/setup.md, "GPUs").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
CACHE=${DPTRAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dptrain}
REQS=$ROOT/requirements.txt
PATCHES=$ROOT/third_party/horovod/patches
SUPPORTED_PYTHONS=(3.13 3.12 3.11)  # newest first: the order a python3.X is looked for
# Debian packages: Open MPI, Debian's own Python (3.11 on Debian 12, 3.13 on 13) with venv and
# headers, and what building Horovod and mpi4py needs; a caller adds more (the tests: Slurm,
# munge, sshd).
read -r -a APT_PKGS <<<"libopenmpi-dev openmpi-bin python3 python3-venv python3-dev g++ cmake patch ${APT_EXTRA:-}"
# A conda environment (VENV=$CONDA_PREFIX) brings its own Open MPI.
[ -x "$VENV/bin/mpicc" ] && read -r -a APT_PKGS <<<"${APT_EXTRA:-}"
HVD_ENV=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
         HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1)
GPU=${GPU:-0}
CUDA_MAJOR=12  # what tensorflow[and-cuda]'s pinned wheels (nvidia-*-cu12) are built for

log() { echo "setup: $*" >&2; }
die() { echo "setup: error: $*" >&2; exit 1; }
unsupported() { echo "setup: error: $*" >&2; exit 2; }

python_version() {  # python_version EXE -> "3.X", or nothing when EXE does not run
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

is_supported() { [[ " ${SUPPORTED_PYTHONS[*]} " == *" $1 "* ]]; }

choose_python() {  # PYTHON if set, else the system python3 if supported, else the newest python3.X
    local v exe
    if [ -n "${PYTHON:-}" ]; then
        v=$(python_version "$PYTHON")
        [ -n "$v" ] || unsupported "PYTHON=$PYTHON does not run; supported: Python ${SUPPORTED_PYTHONS[*]}"
        is_supported "$v" || unsupported "PYTHON=$PYTHON is Python $v; supported: Python ${SUPPORTED_PYTHONS[*]}"
        return 0
    fi
    local system; system=$(python_version python3)
    if is_supported "$system"; then PYTHON=python3; return 0; fi
    for v in "${SUPPORTED_PYTHONS[@]}"; do
        exe=python$v
        if [ "$(python_version "$exe")" = "$v" ]; then PYTHON=$exe; return 0; fi
    done
    unsupported "no supported Python found (python3 is ${system:-missing}); supported: Python ${SUPPORTED_PYTHONS[*]} (set PYTHON=/path/to/python3.X)"
}

check_os() {  # Debian 12 and 13 are tested; other apt systems are tried with a warning
    [ "${#APT_PKGS[@]}" -eq 0 ] && return 0  # conda brings everything but Python's packages
    local id="" version=""
    [ -r /etc/os-release ] && read -r id version < <(. /etc/os-release; echo "${ID:-} ${VERSION_ID:-}")
    command -v dpkg-query >/dev/null ||
        unsupported "unsupported OS '${id:-unknown}': this set-up needs Debian 12 or 13 (apt), or conda (environment.yml)"
    case "$id $version" in
        "debian 12"|"debian 13") ;;
        debian\ *) unsupported "unsupported OS 'Debian $version': supported are Debian 12 and 13" ;;
        *) log "warning: tested on Debian 12 and 13 only, not on '$id $version'" ;;
    esac
}

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

patch_series_hash() {  # the patch series' names and contents
    (cd "$PATCHES" && sha256sum ./*.patch) | sha256sum | cut -c1-16
}

stamp_key() {  # everything whose change must trigger a re-run
    { cat "$REQS" "${BASH_SOURCE[0]}"; "$PYTHON" -V; patch_series_hash; echo "GPU=$GPU"; } |
        sha256sum | cut -c1-16
}

horovod_wheel_key() {  # the versions, patches and build flags a Horovod binary depends on
    # (GPU=1: also the CUDA toolkit and this venv, where its NCCL link points)
    { echo "horovod==$(pin horovod) tensorflow-cpu==$(pin tensorflow-cpu)"; patch_series_hash
      [ "$GPU" = 1 ] && echo "gpu nvcc $NVCC_VERSION $CUDA_HOME ${CUDAHOSTCXX:-} $VENV"
      printf '%s\n' "${HVD_ENV[@]}"; "$PYTHON" -V; uname -m
      mpirun --version 2>&1 | head -n1; c++ --version | head -n1; } | sha256sum | cut -c1-16
}

patched_sdist() {  # patched_sdist DIR -> Horovod's pinned sdist unpacked in DIR/src, patched
    local dir=$1 p
    "$VENV/bin/pip" download -q --no-deps --no-binary :all: --no-build-isolation -d "$dir" \
        "horovod==$(pin horovod)"
    mkdir "$dir/src"
    tar -xzf "$dir"/horovod-*.tar.gz -C "$dir/src" --strip-components=1
    for p in "$PATCHES"/*.patch; do
        patch -d "$dir/src" -p1 --forward --batch --quiet <"$p" >"$dir/patch.log" 2>&1 ||
            die "patch $(basename "$p") does not apply to horovod==$(pin horovod) ($(head -n1 "$dir/patch.log"))"
    done
}

build_horovod() {  # build_horovod OUTDIR: the patched wheel into OUTDIR; the log beside it
    local tmp log=$1/build.log first
    tmp=$(mktemp -d)
    patched_sdist "$tmp"
    log "building Horovod $(pin horovod) with $(ls "$PATCHES" | wc -l) patches (a few minutes; log: $log)"
    mkdir -p "$1"
    if ! env "${HVD_ENV[@]}" TF_CPP_MIN_LOG_LEVEL=3 MAKEFLAGS="-j$(nproc)" "$VENV/bin/pip" wheel -v \
            --no-build-isolation --no-deps --no-cache-dir -w "$tmp/whl" "$tmp/src" >"$log" 2>&1; then
        first=$(grep -m1 -E 'error:|Error [0-9]|CMake Error' "$log" || tail -n1 "$log")
        die "building Horovod failed: ${first#"${first%%[![:space:]]*}"} (full log: $log)"
    fi
    mv "$tmp"/whl/horovod-*.whl "$1"/ && rm -rf "$tmp"
}

install_horovod() {
    local dir wheel
    dir="$CACHE/horovod-$(pin horovod)-$(horovod_wheel_key)"
    wheel=$(ls "$dir"/horovod-*.whl 2>/dev/null | head -n1 || true)
    if [ -z "$wheel" ]; then
        build_horovod "$dir"
        wheel=$(ls "$dir"/horovod-*.whl | head -n1)
    else
        log "reusing cached Horovod wheel $wheel"
    fi
    "$VENV/bin/pip" install -q --no-deps --force-reinstall "$wheel"
}

gpu_toolkit() {  # GPU=1: CUDA_HOME := a CUDA $CUDA_MAJOR toolkit, whose nvcc builds Horovod's kernels
    local nvcc=${CUDA_HOME:+$CUDA_HOME/bin/nvcc} version
    [ -n "$nvcc" ] || nvcc=$(command -v nvcc || true)
    [ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
    [ -n "$nvcc" ] && [ -x "$nvcc" ] || unsupported "GPU=1 needs a CUDA $CUDA_MAJOR toolkit with nvcc to build Horovod's GPU kernels (PyPI's cu$CUDA_MAJOR wheels have none): install one (Debian 13: apt-get install nvidia-cuda-toolkit, from non-free) or set CUDA_HOME"
    version=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p')
    [ "${version%%.*}" = "$CUDA_MAJOR" ] || unsupported "GPU=1: $nvcc is CUDA ${version:-of unknown version}, but tensorflow==$(pin tensorflow-cpu)'s GPU wheels need CUDA $CUDA_MAJOR: install a CUDA $CUDA_MAJOR toolkit or set CUDA_HOME to one"
    CUDA_HOME=$(cd "$(dirname "$nvcc")/.." && pwd)
    NVCC_VERSION=$version
}

gpu_host_compiler() {  # GPU=1, once g++ is installed: CUDAHOSTCXX := a g++ this nvcc accepts
    # nvcc accepts host compilers up to a version: gcc 13 for CUDA 12.0-12.7 (Debian 13's 12.4
    # beside its gcc 14). CMake hands nvcc the compiler CUDAHOSTCXX names.
    local gcc_major minor=${NVCC_VERSION#*.}
    gcc_major=$(c++ -dumpversion | cut -d. -f1)
    minor=${minor%%.*}
    if [ -z "${CUDAHOSTCXX:-}" ] && [ "${minor:-0}" -lt 8 ] && [ "${gcc_major:-0}" -gt 13 ]; then
        command -v g++-13 >/dev/null || unsupported "GPU=1: CUDA $NVCC_VERSION's nvcc takes gcc 13 at most, and c++ is gcc $gcc_major: install g++-13 or set CUDAHOSTCXX to a g++ of 13 or older"
        export CUDAHOSTCXX=$(command -v g++-13)
    fi
}

gpu_build_env() {  # GPU=1: Horovod's NCCL build flags, NCCL from the venv's nvidia-nccl wheel
    local nccl
    gpu_host_compiler
    nccl=$("$VENV/bin/python" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
    # The wheel ships lib/libnccl.so.2 only; the linker looks for libnccl.so.
    mkdir -p "$VENV/nccl/lib"
    ln -sfn "$nccl/lib/libnccl.so.2" "$VENV/nccl/lib/libnccl.so"
    ln -sfn "$nccl/include" "$VENV/nccl/include"
    # The runtime finds libnccl.so.2 where the wheel put it: nothing else puts it on a path.
    HVD_ENV+=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME="$VENV/nccl"
              HOROVOD_NCCL_LINK=SHARED HOROVOD_CUDA_HOME="$CUDA_HOME"
              LDFLAGS="-Wl,-rpath,$nccl/lib")
}

check_build() {  # TensorFlow, MPI and Gloo (and NCCL with GPU=1) must all show as built in
    local out want wanted=(TensorFlow MPI Gloo)
    [ "$GPU" = 1 ] && wanted+=(NCCL)
    out=$(TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/horovodrun" --check-build)
    echo "$out" >&2
    for want in "${wanted[@]}"; do
        grep -q "\[X\] $want" <<<"$out" || die "horovodrun --check-build lacks $want"
    done
}

main() {
    [[ "$GPU" == 0 || "$GPU" == 1 ]] || unsupported "GPU must be 0 or 1, got '$GPU'"
    [ "$GPU" = 1 ] && gpu_toolkit  # before anything is installed: a wrong CUDA is one line
    # A PYTHON given is checked before anything is installed; else apt may bring python3 first.
    [ -n "${PYTHON:-}" ] && choose_python
    check_os
    ensure_system_packages
    choose_python
    local key; key=$(stamp_key)
    if [ -f "$VENV/.setup-stamp" ] && [ "$(cat "$VENV/.setup-stamp")" = "$key" ]; then
        log "up to date ($VENV)"; return 0
    fi
    log "using $PYTHON ($("$PYTHON" -V 2>&1))"
    # A venv of another Python (an older set-up, or PYTHON changed) is made anew.
    if [ "$(python_version "$VENV/bin/python")" != "$(python_version "$PYTHON")" ]; then
        "$PYTHON" -m venv --clear "$VENV"
    fi
    "$VENV/bin/pip" install -q --upgrade "pip==24.3.1"
    # Everything but Horovod first: its build imports TensorFlow from this venv.
    grep -v '^horovod==' "$REQS" >"$VENV/requirements-no-horovod.txt"
    # One TensorFlow: the other build goes first when GPU changed.
    "$VENV/bin/pip" uninstall -q -y "$([ "$GPU" = 1 ] && echo tensorflow-cpu || echo tensorflow)" \
        2>/dev/null || true
    if [ "$GPU" = 1 ]; then  # the same TensorFlow with CUDA; its nvidia wheels as pinned
        sed -i "s/^tensorflow-cpu==\(.*\)/tensorflow[and-cuda]==\1/" "$VENV/requirements-no-horovod.txt"
        sed -n 's/^# gpu: //p' "$REQS" >>"$VENV/requirements-no-horovod.txt"
    fi
    # mpi4py's wheel loads the system's libmpi at run time: the same Open MPI Horovod links to.
    "$VENV/bin/pip" install -q -r "$VENV/requirements-no-horovod.txt"
    [ "$GPU" = 1 ] && gpu_build_env
    install_horovod
    check_build
    echo "$key" >"$VENV/.setup-stamp"
    log "done: activate with 'source $VENV/bin/activate'"
}

main "$@"
