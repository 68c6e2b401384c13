#!/usr/bin/env bash
# Host discovery for elastic training: horovodrun calls this every few seconds and reads one
# "host:slots" line per usable host from its stdout (so it prints nothing else). This example
# reads the lines from a file that you, or an autoscaler, edit while the job runs: add a line
# and a worker starts there and joins; remove one and its worker is stopped.
#   HOSTS_FILE=elastic_hosts horovodrun --gloo -np 2 --min-np 1 --max-np 4 \
#       --host-discovery-script scripts/discover_hosts.sh python train.py --mode elastic
# On Slurm, print the allocation's nodes instead: scontrol show hostnames "$SLURM_JOB_NODELIST".
set -euo pipefail

HOSTS_FILE=${HOSTS_FILE:-elastic_hosts}
if [ ! -r "$HOSTS_FILE" ]; then
    echo "discover_hosts.sh: error: hosts file '$HOSTS_FILE' not found or not readable" >&2
    exit 2
fi
grep -Ev '^[[:space:]]*(#|$)' "$HOSTS_FILE" || true  # no hosts: an empty answer, not a failure
