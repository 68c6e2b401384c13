# Sourced: skip_or_fail NAME WHY -> a check whose input is missing skips, saying why, or fails
# where DPTRAIN_NO_SKIP=1 (CI: every test must run). Exits either way.
skip_or_fail() {
    if [ "${DPTRAIN_NO_SKIP:-}" = 1 ]; then
        echo "$1: error: $2; DPTRAIN_NO_SKIP=1 wants it run" >&2
        exit 1
    fi
    echo "$1: skipped: $2"
    exit 0
}
