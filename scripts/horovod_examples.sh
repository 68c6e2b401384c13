#!/usr/bin/env bash
# Horovod's own TensorFlow 2 example scripts, unedited, on NP ranks with the Horovod that
# scripts/setup.sh built:   bash scripts/horovod_examples.sh DIR   (part of make horovod-tests)
# DIR holds examples/tensorflow2/ and examples/elastic/tensorflow2/ as in Horovod's repository.
# Each runs to its end under horovodrun (the elastic ones with a host-discovery script, on
# Gloo); then every rank's trainable weights must be bit-identical. A negative control runs one
# example with Horovod's allreduce skipped and wants that check to fail. MNIST cannot be
# downloaded: tests/helpers/horovod_examples/ serves scikit-learn's digits in its place. Under Keras 3
# the scripts' own two Keras 2 calls are tolerated (DPTRAIN_KERAS2_CALLS, see there); under
# KERAS=2 nothing is. Knobs: VENV, NP, TIMEOUT (per run, s), EXAMPLES (names, default all).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${1:-}
VENV=${VENV:-$ROOT/.venv}
[[ $VENV == /* ]] || VENV=$PWD/$VENV  # the runs start in other folders
NP=${NP:-2}
TIMEOUT=${TIMEOUT:-900}
HERE=$ROOT/tests/helpers/horovod_examples
# The synthetic benchmarks on a small model and few batches (their defaults: ResNet-50, 110
# batches of 32 at 224x224, an hour on two cores); the MNIST ones as written.
SYNTH=(--model MobileNet --batch-size 4 --num-batches-per-iter 2 --num-iters 2)
declare -A ARGS=(
    [tensorflow2_mnist]=""
    [tensorflow2_keras_mnist]=""
    [tensorflow2_synthetic_benchmark]="${SYNTH[*]} --num-warmup-batches 1"
    [tensorflow2_keras_synthetic_benchmark]="${SYNTH[*]}"
    [tensorflow2_mnist_elastic]=""
    [tensorflow2_keras_mnist_elastic]=""
    [tensorflow2_synthetic_benchmark_elastic]="${SYNTH[*]} --num-warmup-batches 1"
)
read -r -a EXAMPLES <<<"${EXAMPLES:-tensorflow2_synthetic_benchmark tensorflow2_keras_synthetic_benchmark tensorflow2_mnist tensorflow2_keras_mnist tensorflow2_mnist_elastic tensorflow2_keras_mnist_elastic tensorflow2_synthetic_benchmark_elastic}"

source "$ROOT/scripts/skip_or_fail.sh"
[ -n "$DIR" ] && [ -d "$DIR/examples/tensorflow2" ] || skip_or_fail horovod-examples \
    "no Horovod examples at '${DIR:-(none given)}' (give the folder holding examples/tensorflow2)"
DIR=$(cd "$DIR" && pwd)
export PATH=$VENV/bin:$PATH
[ -f "$VENV/bin/activate" ] && source "$VENV/bin/activate"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/python" "$HERE/digits_as_mnist.py" "$WORK/digits.npz"
printf '#!/bin/sh\necho localhost:%s\n' "$NP" >"$WORK/discover.sh" && chmod +x "$WORK/discover.sh"
keras=$(cat "$VENV/.setup-keras" 2>/dev/null || echo 3)
export PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH} DPTRAIN_MNIST=$WORK/digits.npz
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONDONTWRITEBYTECODE=1
[ "$keras" = 3 ] && export DPTRAIN_KERAS2_CALLS=1

run_example() {  # run_example NAME OUTDIR [ENV=VALUE...] -> horovodrun's exit status
    local name=$1 out=$2 script launch=(-np "$NP")
    shift 2
    script=$(ls "$DIR"/examples/tensorflow2/"$name".py "$DIR"/examples/elastic/tensorflow2/"$name".py 2>/dev/null | head -n1)
    [ -n "$script" ] || { echo "horovod-examples: error: no $name.py under $DIR/examples" >&2; return 1; }
    # Elastic on one host: horovodrun's driver finds the hosts' common NIC by talking between
    # two hosts and waits for a second one (10 min) unless given the interface.
    [[ $name == *_elastic ]] && launch+=(--min-np "$NP" --max-np "$NP" --network-interface lo
                                         --host-discovery-script "$WORK/discover.sh")
    mkdir -p "$out/weights" && cd "$out"  # the scripts write checkpoints into their cwd
    # timeout ends horovodrun, which ends its ranks; -k: SIGKILL if it does not go in 30 s.
    # shellcheck disable=SC2086  # ARGS holds words
    env "$@" DPTRAIN_WEIGHTS_DIR="$out/weights" timeout -k 30 "$TIMEOUT" \
        horovodrun "${launch[@]}" python "$script" ${ARGS[$name]} >"$out/log" 2>&1
}

failed=0
echo "horovod-examples: $NP ranks, tf.keras is Keras $keras$([ "$keras" = 3 ] && echo ', the scripts'"'"' own compile(experimental_run_tf_function=) and optimizer.variables() tolerated')"
for name in "${EXAMPLES[@]}"; do
    start=$SECONDS rc=0
    run_example "$name" "$WORK/$name" || rc=$?
    verdict=$("$VENV/bin/python" "$HERE/same_weights.py" "$WORK/$name/weights" "$NP") ||
        { [ "$rc" != 0 ] || rc=1; }  # ran, but the ranks end apart
    echo "example $name: exit $rc, $((SECONDS - start)) s, $verdict"
    if [ "$rc" != 0 ]; then
        failed=1
        tail -n 15 "$WORK/$name/log" | sed 's/^/    /'
    fi
done

# The check must be able to fail: the same run with the allreduce skipped ends apart.
control=tensorflow2_synthetic_benchmark
rc=0
run_example "$control" "$WORK/control" DPTRAIN_SKIP_ALLREDUCE=1 || rc=$?
verdict=$("$VENV/bin/python" "$HERE/same_weights.py" "$WORK/control/weights" "$NP") || rc+=" $?"
if [ "$rc" = "0 1" ]; then  # ran to its end, and same_weights.py saw the ranks apart
    echo "negative control ($control, allreduce skipped): exit 0, $verdict"
else
    echo "horovod-examples: error: negative control ($control, allreduce skipped): exit ${rc%% *}, $verdict; the weights check must see its ranks apart" >&2
    tail -n 15 "$WORK/control/log" | sed 's/^/    /' >&2
    failed=1
fi
exit "$failed"
