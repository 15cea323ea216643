#!/usr/bin/env bash
# Runs a training command until it finishes, resuming after crashes (the command must carry -y 1 and -o OUT_DIR).
#
#   scripts/autoresume.sh OUT_DIR COMMAND...
#
# Exit status 0: the run has finished (the trainer exited 0). A failure is retried, after RESTART_DELAY seconds
# (default 10), as long as the attempt made progress (its newest complete checkpoint, OUT_DIR/ckpt_*/meta.json, is
# newer than the one it started from) or did not stop with the trainer's own "error: " line: a crash, a killed
# rank, a pre-empted node are restartable; a bad flag, missing data or a diverged run (--max-bad-steps) that made
# no progress is not, and is reported instead of being retried forever. At most MAX_RESTARTS (default 100)
# restarts. Each attempt's output goes to the console and to OUT_DIR/attempt_<n>.log.
set -u
if [ $# -lt 2 ]; then echo "usage: $0 OUT_DIR COMMAND..." >&2; exit 2; fi
out=$1; shift
mkdir -p "$out"
latest_ckpt() {  # the newest step with a complete checkpoint, or -1
    local s=-1 d
    for d in "$out"/ckpt_*/meta.json; do
        [ -f "$d" ] || continue
        d=${d%/meta.json}; d=${d##*/ckpt_}; d=$((10#$d))
        [ "$d" -gt "$s" ] && s=$d
    done
    echo $s
}
max_restarts=${MAX_RESTARTS:-100}
for ((attempt = 1; attempt <= max_restarts + 1; attempt++)); do
    before=$(latest_ckpt)
    log="$out/attempt_$attempt.log"
    echo "autoresume: attempt $attempt, newest checkpoint: step $before ($(date -u +%FT%TZ))"
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        echo "autoresume: finished after $attempt attempt(s)"
        exit 0
    fi
    after=$(latest_ckpt)
    if [ "$after" -le "$before" ] && grep -q '^error: ' "$log"; then
        echo "autoresume: the run stopped with an error and made no progress (checkpoint step $after); not retrying:" >&2
        grep '^error: ' "$log" | head -3 >&2
        exit "$rc"
    fi
    echo "autoresume: exit status $rc (checkpoint step $before -> $after); restarting in ${RESTART_DELAY:-10}s" >&2
    sleep "${RESTART_DELAY:-10}"
done
echo "autoresume: gave up after $max_restarts restarts" >&2
exit 1
