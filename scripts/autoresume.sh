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
# restarts. Each attempt's output goes to the console and to OUT_DIR/attempt_<n>.log, numbered on from the logs
# already there: a second job on the same OUT_DIR never overwrites an earlier job's logs.
#
# Preemption (docs/checkpoints.md): SIGTERM, SIGINT, SIGHUP, SIGUSR1 or SIGUSR2 sent to this script is passed on to
# the command's process group as FORWARD_SIGNAL (default USR1, the trainer's default --preempt-signal, which
# mpirun forwards to every rank; on SIGTERM mpirun would end the job itself). The command runs in a process group
# of its own, so a signal to this script's group (from `timeout`, or a terminal's Ctrl-C) reaches it only through
# here, once. The script waits: the trainer finishes its step, saves a checkpoint and exits 75. Exit status 75
# (from the trainer, or any end after a forwarded signal) ends the loop with status 75, "requeue": the job is being
# preempted, and the next job resumes from the checkpoint. A second signal is forwarded too (the trainer then stops
# at once). Nothing is left running: KILL_AFTER seconds (default 600) after the first signal the command's process
# group gets SIGKILL, and the script returns only once that group is empty.
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
next_log_number() {  # one past the highest attempt_<n>.log in OUT_DIR
    local n=0 f k
    for f in "$out"/attempt_*.log; do
        [ -e "$f" ] || continue
        k=${f##*/attempt_}; k=${k%.log}
        [[ "$k" =~ ^[0-9]+$ ]] && [ "$((10#$k))" -gt "$n" ] && n=$((10#$k))
    done
    echo $((n + 1))
}
child=0 signalled=0 killer=
forward() {  # forward SIG: pass a signal on to the command; the first one also arms the SIGKILL deadline
    signalled=1
    [ "$child" -gt 0 ] || return
    local sig=${FORWARD_SIGNAL:-USR1}
    echo "autoresume: SIG$1 received, SIG$sig sent to the command (process group $child); waiting for it to save and stop" >&2
    kill -s "$sig" -- "-$child" 2>/dev/null || kill -s "$sig" "$child" 2>/dev/null
    if [ -z "$killer" ]; then
        ( trap - TERM INT HUP USR1 USR2; sleep "${KILL_AFTER:-600}"; kill -KILL -- "-$child" 2>/dev/null ) &
        killer=$!
    fi
}
for s in TERM INT HUP USR1 USR2; do trap "forward $s" "$s"; done
max_restarts=${MAX_RESTARTS:-100}
n=$(next_log_number)
for ((attempt = 1; attempt <= max_restarts + 1; attempt++, n++)); do
    before=$(latest_ckpt)
    log="$out/attempt_$n.log"
    echo "autoresume: attempt $attempt ($log), newest checkpoint: step $before ($(date -u +%FT%TZ))"
    # The output goes through tee, which ignores the signals (it must outlive the command to log its last lines);
    # the command runs in its own process group (set -m).
    exec 3> >(trap '' TERM INT HUP USR1 USR2; exec tee -a "$log")
    tee_pid=$!
    set -m
    "$@" >&3 2>&3 3>&- &
    child=$!
    set +m
    exec 3>&-
    # `wait` returns early when a trapped signal arrives: wait again until the command has really ended.
    while :; do
        wait "$child"; rc=$?
        kill -0 "$child" 2>/dev/null || break
    done
    # After a signal, the command's whole group must be gone (a wrapper may end before the trainer it started).
    while [ $signalled -eq 1 ] && kill -0 -- "-$child" 2>/dev/null; do sleep 0.2; done
    child=0
    [ -n "$killer" ] && kill "$killer" 2>/dev/null
    wait "$tee_pid"  # the log is complete
    if [ "$rc" -eq 0 ]; then
        echo "autoresume: finished after $attempt attempt(s)"
        exit 0
    fi
    after=$(latest_ckpt)
    if [ "$rc" -eq 75 ] || [ $signalled -eq 1 ]; then
        echo "autoresume: preempted (exit status $rc), newest checkpoint: step $after; exiting 75: requeue the job," \
             "it resumes from there" >&2
        exit 75
    fi
    if [ "$after" -le "$before" ] && grep -q '^error: ' "$log"; then
        echo "autoresume: the run stopped with an error and made no progress (checkpoint step $after); not retrying:" >&2
        grep '^error: ' "$log" | head -3 >&2
        exit "$rc"
    fi
    echo "autoresume: exit status $rc (checkpoint step $before -> $after); restarting in ${RESTART_DELAY:-10}s" >&2
    sleep "${RESTART_DELAY:-10}" &
    wait $!  # (a signal ends the wait)
    kill $! 2>/dev/null
    if [ $signalled -eq 1 ]; then echo "autoresume: a signal between attempts; exiting 75 (requeue)" >&2; exit 75; fi
done
echo "autoresume: gave up after $max_restarts restarts" >&2
exit 1
