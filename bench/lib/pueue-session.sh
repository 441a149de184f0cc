#!/usr/bin/env bash
# One client session against the pueued that pgo-build started for this run (its config is
# $PGO_BUILD_RUN_DIR/pueue.yml): what a pueue user does from a terminal. Usage:
#   pueue-session.sh train N     add N tasks in two groups, status, parallel, logs, wait, clean
#   pueue-session.sh holdout N   add N labelled tasks, status (json and table), logs, wait, clean
# Each `pueue add` and `pueue status` is timed without forking a timer (bash's EPOCHREALTIME)
# and written to $PGO_BUILD_METRICS (add_ms, status_ms: one line per command); the session's
# client commands per second go to stdout (`commands: N/s`).
set -euo pipefail
cfg="$PGO_BUILD_RUN_DIR/pueue.yml"
pueue() { "$PGO_BUILD_BIN_PUEUE" -c "$cfg" "$@" >/dev/null; }
commands=0
timed() { # metric, then a pueue command
    local metric=$1 t0=${EPOCHREALTIME/./}
    shift
    pueue "$@"
    local us=$((${EPOCHREALTIME/./} - t0))
    commands=$((commands + 1))
    printf '{"name":"%s","value":%d.%03d}\n' "$metric" $((us / 1000)) $((us % 1000)) >>"$PGO_BUILD_METRICS"
}
plain() {
    pueue "$@"
    commands=$((commands + 1))
}
mode=$1 n=$2
start=${EPOCHREALTIME/./}
case $mode in
train)
    plain group add builds
    plain parallel 4
    plain parallel -g builds 2
    for i in $(seq 1 "$n"); do
        if ((i % 3 == 0)); then
            timed add_ms add -g builds -- "echo build $i"
        else
            timed add_ms add -- "echo task $i && true"
        fi
        ((i % 10 == 0)) && timed status_ms status
    done
    plain wait -a
    for i in $(seq 1 10); do plain log "$i"; done
    timed status_ms status --json
    plain clean
    ;;
holdout)
    plain parallel 4
    for i in $(seq 1 "$n"); do
        timed add_ms add -l "job-$i" -- "printf '%s\n' holdout-$i"
        if ((i % 5 == 0)); then
            timed status_ms status --json
        elif ((i % 5 == 2)); then
            timed status_ms status
        fi
    done
    plain wait
    for i in $(seq 0 5 $((n - 1))); do plain log --json "$i"; done
    plain clean
    ;;
*)
    echo "usage: pueue-session.sh train|holdout N" >&2
    exit 2
    ;;
esac
us=$((${EPOCHREALTIME/./} - start))
printf 'commands: %d.%03d/s\n' $((commands * 1000000 / us)) $(((commands * 1000000000 / us) % 1000))
