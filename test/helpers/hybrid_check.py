#!/usr/bin/python3
"""Checks of a hybrid-sharding run's log (--show-placement), for test/e2e/hybrid_shard_test.sh.

usage:
  hybrid_check.py placement LOG N
      every rank's placement line: the dp ranks are a permutation of the ranks; each group has N ranks, numbered
      0..N-1 in local-rank order, and lies on one node when N divides the ranks per node; a rank reads the data
      block of its dp rank (B = 1: sequences [dp, dp + 1)) and owns the ZeRO shard of its place in the group
  hybrid_check.py bytes FLAT_LOG HYBRID_LOG N STEPS
      the bytes each rank handed to collectives across the groups under hybrid sharding (ZeRO 1, fp32) are at most
      1/N of what each rank of the flat ZeRO-1 run handed to its (world-spanning) collectives, and over all ranks
      they add up to exactly R x 4 bytes x parameters x STEPS (every group all-reduces each gradient element once
      per step, split among its N ranks)
Exit 0 when the check holds; the last line says what was checked or what differs.
"""
import re
import sys

PLACE = re.compile(r"placement: rank (\d+) of (\d+) \| node (\d+) of (\d+), local rank (\d+) of (\d+), .*"
                   r"data: sequences \[(\d+), (\d+)\) .* ZeRO-\d shard \[(\d+), (\d+)\) \| "
                   r"dp rank (\d+) = group (\d+) x (\d+) \+ (\d+)")
BYTES = re.compile(r"comm bytes: rank (\d+) \| world (\d+) \| within group (\d+) \| across groups (\d+)")
PARAMS = re.compile(r"ZeRO stage \d over \d+ ranks?: (\d+) parameters")


def placements(log):
    rows = {}
    for line in open(log):
        m = PLACE.search(line)
        if m:
            v = [int(x) for x in m.groups()]
            rows[v[0]] = dict(world=v[1], node=v[2], local=v[4], local_size=v[5], seq=v[6], shard_begin=v[8],
                              shard_end=v[9], dp=v[10], group=v[11], n=v[12], place=v[13])
    return rows


def check_placement(log, n):
    n = int(n)
    rows = placements(log)
    world = len(rows)
    if world == 0 or sorted(rows) != list(range(rows[0]["world"])):
        sys.exit("placement lines of ranks %s, expected 0..%d" % (sorted(rows), world - 1))
    if sorted(r["dp"] for r in rows.values()) != list(range(world)):
        sys.exit("dp ranks %s are not a permutation" % [rows[r]["dp"] for r in sorted(rows)])
    shard = None
    for rank, r in rows.items():
        if r["n"] != n or r["dp"] != r["group"] * n + r["place"]:
            sys.exit("rank %d: dp %d, group %d x %d + %d" % (rank, r["dp"], r["group"], r["n"], r["place"]))
        if r["seq"] != r["dp"]:
            sys.exit("rank %d (dp %d) reads sequence %d of each micro-step" % (rank, r["dp"], r["seq"]))
        shard = shard or r["shard_end"] - r["shard_begin"]
        if r["shard_begin"] != r["place"] * shard:
            sys.exit("rank %d, place %d in its group, owns [%d, %d)" % (rank, r["place"], r["shard_begin"],
                                                                         r["shard_end"]))
    groups = {}
    for rank, r in rows.items():
        groups.setdefault(r["group"], []).append(r)
    for g, members in groups.items():
        if sorted(m["place"] for m in members) != list(range(n)):
            sys.exit("group %d has places %s" % (g, sorted(m["place"] for m in members)))
        same_node = [m for m in members if m["node"] == members[0]["node"]]
        if all(m["local_size"] % n == 0 for m in members) and len(same_node) != n:
            sys.exit("group %d spans nodes %s" % (g, sorted({m["node"] for m in members})))
        by_local = sorted(same_node, key=lambda m: m["local"])
        if [m["place"] for m in by_local] != sorted(m["place"] for m in by_local):
            sys.exit("group %d is not numbered in local-rank order" % g)
    print("%d ranks in %d groups of %d: dp rank = group x %d + place, one node per group, data block = dp rank, "
          "shard = place" % (world, len(groups), n, n))


def comm_bytes(log):
    got = {}
    for line in open(log):
        m = BYTES.search(line)
        if m:
            got[int(m.group(1))] = [int(x) for x in m.groups()[1:]]
    return got


def check_bytes(flat_log, hybrid_log, n, steps):
    n, steps = int(n), int(steps)
    flat, hybrid = comm_bytes(flat_log), comm_bytes(hybrid_log)
    params = [int(m.group(1)) for m in map(PARAMS.search, open(hybrid_log)) if m]
    if not flat or not hybrid or len(flat) != len(hybrid) or not params:
        sys.exit("comm byte lines: %d flat, %d hybrid; parameter lines: %d" % (len(flat), len(hybrid), len(params)))
    flat_min = min(world for world, _, _ in flat.values())
    across_max = max(across for _, _, across in hybrid.values())
    across_sum = sum(across for _, _, across in hybrid.values())
    replicas = len(hybrid) // n
    if across_max * n > flat_min:
        sys.exit("across groups %d bytes on some rank > flat ZeRO-1's %d / %d" % (across_max, flat_min, n))
    want = replicas * 4 * params[0] * steps
    if across_sum != want:
        sys.exit("across groups %d bytes in all, expected %d x 4 x %d x %d = %d" % (across_sum, replicas, params[0],
                                                                                    steps, want))
    print("across groups at most %d bytes per rank <= flat ZeRO-1's %d / %d (ratio %.3f); %d in all = R x 4 x N x "
          "steps" % (across_max, flat_min, n, across_max / flat_min, across_sum))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "placement":
        check_placement(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "bytes":
        check_bytes(*sys.argv[2:])
    else:
        sys.exit(__doc__)
