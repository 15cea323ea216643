#!/usr/bin/env bash
# Multi-node training with OpenMPI and a hostfile (docs/distributed.md, "Launching").
#
#   scripts/multi_node/run_mpirun.sh HOSTFILE [train_gpt2 arguments...]
#
# HOSTFILE has one line per node, `slots` = GPUs on it:
#   node01 slots=8
#   node02 slots=8
# Without train_gpt2 arguments it runs the GPT-2 recipe RECIPE (124M; scripts/gpt2_recipes.sh) on all the ranks: the
# micro-batch and the accumulation steps are derived from the recipe's -d and the number of ranks (or it stops with
# a message when that GPU count cannot keep -d). Given arguments are passed as they are (the trainer refuses a -d
# that is not a multiple of -b x -t x ranks, naming the -b values that work).
# Every node needs the same binary and data paths (shared filesystem) and password-less ssh from this node.
# Settings through the environment (defaults in brackets):
#   GPUS_PER_NODE [8]          ranks per node
#   RECIPE [124M]              the recipe run without arguments (and its DATA_DIR, OUT_DIR, MICRO_BATCH, ...)
#   NCCL_SOCKET_IFNAME [unset] interface for NCCL's bootstrap/sockets, e.g. eth0 (forwarded when set)
#   NCCL_IB_HCA [unset]        InfiniBand adapters, e.g. mlx5 (forwarded when set)
#   NCCL_DEBUG [WARN]          INFO to see the transports NCCL picked
#   MPI_IFACE [unset]          restrict MPI's own TCP traffic to this interface
#   TRAIN [./train_gpt2]       the binary
#   PRINT_ONLY [unset]         1: print the mpirun command instead of running it
set -euo pipefail
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: $0 HOSTFILE [train_gpt2 arguments...]  (HOSTFILE: 'host slots=N' per line)" >&2
    exit 1
fi
HOSTFILE="$1"; shift
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
TRAIN="${TRAIN:-./train_gpt2}"
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"

# Nodes = non-empty, non-comment lines of the hostfile.
NODES=$(grep -cvE '^\s*(#|$)' "$HOSTFILE" || true)
if [ "$NODES" -lt 1 ]; then echo "error: $HOSTFILE lists no host" >&2; exit 1; fi
NP=$((NODES * GPUS_PER_NODE))
if [ $# -eq 0 ]; then
    source "$(dirname "$0")/../gpt2_recipes.sh"
    gpt2_train_args "${RECIPE:-124M}" "$NP" || exit 1
    set -- "${TRAIN_ARGS[@]}"
fi

ARGS=(-np "$NP" --hostfile "$HOSTFILE" --map-by "ppr:${GPUS_PER_NODE}:node" --bind-to none
      -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG)
for v in NCCL_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_DISABLE NCCL_IB_GID_INDEX NCCL_NET_GDR_LEVEL NCCL_P2P_DISABLE \
         NCCL_DEBUG_SUBSYS LLMC_RUN_ID; do
    if [ -n "${!v:-}" ]; then ARGS+=(-x "$v"); fi
done
if [ -n "${MPI_IFACE:-}" ]; then ARGS+=(--mca btl_tcp_if_include "$MPI_IFACE" --mca oob_tcp_if_include "$MPI_IFACE"); fi
if [ "$(id -u)" -eq 0 ]; then ARGS+=(--allow-run-as-root); fi

if [ -n "${PRINT_ONLY:-}" ]; then source "$(dirname "$0")/../quote_command.sh"; quote_command mpirun "${ARGS[@]}" "$TRAIN" "$@"; exit 0; fi
echo "launching $NP ranks ($NODES nodes x $GPUS_PER_NODE) from $HOSTFILE: $TRAIN $*"
exec mpirun "${ARGS[@]}" "$TRAIN" "$@"
