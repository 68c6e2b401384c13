#!/usr/bin/env bash
# A new user on Debian 13 (trixie): build a minimal Debian 13 root with debootstrap, clone this
# repository's HEAD into it, run the README's set-up there, train the seed job on 2 ranks
# (mpirun, horovodrun over MPI and over Gloo) and check that its losses equal this machine's.
#   bash scripts/debian13_check.sh          (make debian13-check; root, Debian host)
# The root and its caches (apt, pip, the Horovod wheel) stay in DEB13_DIR, so a rerun takes
# minutes; `rm -rf` it to start from nothing. DEB13_SUITE=1 also runs `make test-platform` in
# the root (the fast and platform tiers, what Debian 13 can change; docs/testing.md), and
# DEB13_SUITE=all the whole `make test`. DPTRAIN_NO_SKIP passes through. DEB13_GPU=1 checks the GPU build instead, in a root of its own
# (make gpu-build-check): Debian's CUDA 12 toolkit, `make setup GPU=1`, `horovodrun
# --check-build` listing NCCL, and the seed job on the CPU equal to this host's (about 6 GB of
# downloads the first time). Knobs: DEB13_DIR, DEB13_SUITE, DEB13_GPU, TIMEOUT.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEB13_GPU=${DEB13_GPU:-0}
suffix=""; [ "$DEB13_GPU" = 0 ] || suffix=-gpu  # a root of its own: 6 GB more
DEB13_DIR=${DEB13_DIR:-/var/cache/dptrain-debian13$suffix}
TIMEOUT=${TIMEOUT:-3600}
CHROOT=$DEB13_DIR/root
log() { echo "debian13-check: $*" >&2; }
die() { echo "debian13-check: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"

make_root() {  # a minimal trixie root from the mirror this host's apt uses
    local mirror
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
             true)
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources"
    log "debootstrap trixie into $CHROOT (about 3 minutes)"
    rm -rf "$CHROOT.partial"
    debootstrap --variant=minbase --include=ca-certificates,git,make trixie \
        "$CHROOT.partial" "$mirror" >"$DEB13_DIR/debootstrap.log" 2>&1 ||
        die "debootstrap failed (log: $DEB13_DIR/debootstrap.log)"
    mv "$CHROOT.partial" "$CHROOT"
}

copy_host_config() {  # how this host reaches the package registries, nothing else
    local f
    for f in /etc/resolv.conf /etc/ssl/certs/ca-certificates.crt /etc/pip.conf \
             /etc/apt/apt.conf.d/99* /root/.config/pip/pip.conf; do
        [ -e "$f" ] || continue
        mkdir -p "$CHROOT$(dirname "$f")"
        cp -L "$f" "$CHROOT$f"
    done
    name_the_host
}

name_the_host() {  # /etc/hosts names the host, as Debian's installer writes it
    local hosts=$CHROOT/etc/hosts name; name=$(hostname)  # a chroot shares the host's name
    touch "$hosts"
    grep -qE "^127\.0\.0\.1[[:space:]].*localhost" "$hosts" || printf '127.0.0.1\tlocalhost\n' >>"$hosts"
    grep -qE "^[^#]*[[:space:]]$name([[:space:]]|\$)" "$hosts" || printf '127.0.1.1\t%s\n' "$name" >>"$hosts"
}

mount_root() {  # the root on itself first: `ip netns` (the two-host tests) needs / a mount
    local d
    mountpoint -q "$CHROOT" || { mount --bind "$CHROOT" "$CHROOT" && mount --make-private "$CHROOT"; }
    for d in proc sys dev; do
        mountpoint -q "$CHROOT/$d" || mount --rbind "/$d" "$CHROOT/$d"
        mount --make-rslave "$CHROOT/$d"
    done
}

unmount_root() {  # everything mounted under the root, the root itself last
    if mountpoint -q "$CHROOT"; then umount -R "$CHROOT"; fi
}

in_root() {  # in_root LOG SCRIPT: run SCRIPT with bash inside the root, as a fresh login would
    timeout -k 30 "$TIMEOUT" chroot "$CHROOT" /usr/bin/env -i HOME=/root TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DPTRAIN_NO_SKIP="${DPTRAIN_NO_SKIP:-}" \
        bash -euo pipefail -c "$2" >"$1" 2>&1 ||
        { tail -n 20 "$1" >&2; die "the run inside Debian 13 failed (log: $1)"; }
}

compare() {  # compare HOST_METRICS ROOT_METRICS RTOL: every logged loss within RTOL (0: equal)
    python3 - "$@" <<'PY'
import json, sys
def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if line.strip()]
host, root, rtol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
gap = max(abs(a - b) / abs(a) for a, b in zip(host, root)) if len(host) == len(root) else None
if gap is None or gap > rtol:
    sys.exit(f"{sys.argv[2]}: {len(root)} losses, largest relative gap {gap} > {rtol}")
print(f"{len(root)} losses, largest relative gap {gap:.1e}")
PY
}

gpu_build() {  # DEB13_GPU=1: the GPU build where there is no GPU, its seed job on the CPU
    log "GPU build inside Debian 13: CUDA 12 from non-free, make setup GPU=1 (log: $DEB13_DIR/gpu.log)"
    local t0=$SECONDS
    in_root "$DEB13_DIR/gpu.log" '
        sed -i "s/ trixie main\$/ trixie main contrib non-free/" /etc/apt/sources.list
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            nvidia-cuda-toolkit g++-13 >/dev/null
        nvcc --version | tail -n2
        cd /root/dptrain
        s=$SECONDS; GPU=1 make setup; echo "GPU set-up: $((SECONDS - s)) s"
        TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/horovodrun --check-build
        mpirun --allow-run-as-root --oversubscribe -np 2 .venv/bin/python train.py \
            --dtype float64 --metrics /tmp/gpu-build.jsonl >/dev/null
        '
    log "inside Debian 13: $((SECONDS - t0)) s; $(grep -m1 "GPU set-up:" "$DEB13_DIR/gpu.log")"
    awk '/Available Frameworks:/ {p = 1} p {print "    " $0} /Tensor Operations:/ {t = p}
         t && /Gloo/ {exit}' "$DEB13_DIR/gpu.log" >&2  # what --check-build printed
    grep -q '\[X\] NCCL' "$DEB13_DIR/gpu.log" || die "horovodrun --check-build lacks NCCL"
    "$ROOT/.venv/bin/python" "$ROOT/train.py" --dtype float64 --metrics "$DEB13_DIR/host.jsonl" \
        >/dev/null
    log "GPU build, mpirun -np 2 on the CPU: $(compare "$DEB13_DIR/host.jsonl" \
        "$CHROOT/tmp/gpu-build.jsonl" 1e-12)"
    log "ok: the GPU build lists NCCL and trains as this host's CPU build does"
}

main() {
    mkdir -p "$DEB13_DIR"
    [ -x "$CHROOT/usr/bin/apt-get" ] || make_root
    copy_host_config
    rm -rf "$CHROOT/root/dptrain"
    git clone -q --no-local "$ROOT" "$CHROOT/root/dptrain"
    trap unmount_root EXIT
    mount_root
    [ "$DEB13_GPU" = 1 ] && { gpu_build; return; }
    log "set-up and seed job inside Debian 13 (log: $DEB13_DIR/run.log)"
    local t0=$SECONDS
    in_root "$DEB13_DIR/run.log" '
        cd /root/dptrain
        . /etc/os-release; echo "inside: $PRETTY_NAME"
        time make setup
        .venv/bin/python -V; mpirun --version | head -n1
        job="train.py --dtype float64"  # float64: the comparisons below are to rounding
        time .venv/bin/python $job --metrics /tmp/single.jsonl >/dev/null
        time mpirun --allow-run-as-root --oversubscribe -np 2 .venv/bin/python $job \
            --metrics /tmp/mpirun.jsonl >/dev/null
        time .venv/bin/horovodrun -np 2 .venv/bin/python $job --metrics /tmp/horovodrun.jsonl >/dev/null
        time .venv/bin/horovodrun --gloo -np 2 .venv/bin/python $job --metrics /tmp/gloo.jsonl >/dev/null
        '
    log "inside Debian 13: $((SECONDS - t0)) s; $(grep -m1 inside: "$DEB13_DIR/run.log")"
    "$ROOT/.venv/bin/python" "$ROOT/train.py" --dtype float64 --metrics "$DEB13_DIR/host.jsonl" \
        >/dev/null
    # One process: the same libraries on the same processor give the same bits. Two ranks sum
    # the shares in another order: float64 rounding, far below 1e-12 relative.
    log "single: $(compare "$DEB13_DIR/host.jsonl" "$CHROOT/tmp/single.jsonl" 0)"
    log "mpirun -np 2: $(compare "$DEB13_DIR/host.jsonl" "$CHROOT/tmp/mpirun.jsonl" 1e-12)"
    log "horovodrun -np 2: $(compare "$DEB13_DIR/host.jsonl" "$CHROOT/tmp/horovodrun.jsonl" 1e-12)"
    log "horovodrun --gloo -np 2: $(compare "$DEB13_DIR/host.jsonl" "$CHROOT/tmp/gloo.jsonl" 1e-12)"
    log "ok: the seed job in Debian 13 equals this host's"
    local target
    case "${DEB13_SUITE:-0}" in
        0) return 0 ;;
        1) target=test-platform ;;
        all) target=test ;;
        *) die "DEB13_SUITE must be 0, 1 or all, got '$DEB13_SUITE'" ;;
    esac
    log "make $target inside Debian 13 (log: $DEB13_DIR/suite.log)"
    t0=$SECONDS
    in_root "$DEB13_DIR/suite.log" "cd /root/dptrain && make $target"
    log "suite inside Debian 13, $((SECONDS - t0)) s: $(grep -a -E '[0-9]+ passed' "$DEB13_DIR/suite.log" | tail -n1)"
}

main "$@"
