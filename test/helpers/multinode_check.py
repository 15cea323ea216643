#!/usr/bin/python3
"""Checks for test/e2e/multinode_test.sh: a run whose ranks were told they sit on several nodes against the same run on
one node.

  multinode_check.py placement ONE_LOG MULTI_LOG LAYOUT   the --show-placement lines: on one node every rank is
      node 0, local rank = rank, GPU = rank; in the multi-node run node, local rank and GPU follow LAYOUT (Slurm's
      tasks-per-node list, ranks placed node by node) while the data slice and the ZeRO shard of every rank are the
      one-node run's (they depend on the global rank only)
  multinode_check.py checkpoints ONE_DIR MULTI_DIR   the same checkpoints, every file byte for byte (meta.json as
      JSON, without metrics_bytes, which depends on metrics.jsonl's timings,
      and meta_crc32c, which covers it)
Exit 0 when the check holds; the last line says what was compared or what differs.
"""
import glob
import json
import os
import re
import sys

LINE = re.compile(r"placement: rank (\d+) of (\d+) \| node (\d+) of (\d+), local rank (\d+) of (\d+), gpu (\d+) "
                  r"\((\w+)\) \| data: (sequences \[\d+, \d+\) of each micro-step's \d+) \| (ZeRO-\d shard \[\d+, \d+\))")


def placements(log):
    out = {}
    for line in open(log, errors="replace"):
        m = LINE.search(line)
        if m:
            g = m.groups()
            out[int(g[0])] = dict(world=int(g[1]), node=int(g[2]), nodes=int(g[3]), local=int(g[4]),
                                  local_size=int(g[5]), gpu=int(g[6]), launcher=g[7], data=g[8], zero=g[9])
    return out


def expand(layout):
    counts = []
    for e in layout.split(","):
        m = re.fullmatch(r"(\d+)\(x(\d+)\)", e)
        counts += [int(m.group(1))] * int(m.group(2)) if m else [int(e)]
    where = []
    for node, n in enumerate(counts):
        where += [(node, local, n) for local in range(n)]
    return where, len(counts)


def check_placement(one_log, multi_log, layout):
    one, multi = placements(one_log), placements(multi_log)
    where, nodes = expand(layout)
    world = len(where)
    if sorted(one) != list(range(world)) or sorted(multi) != list(range(world)):
        sys.exit("placement lines of ranks %s (one node) and %s (%s), expected 0..%d" %
                 (sorted(one), sorted(multi), layout, world - 1))
    for r in range(world):
        o, m = one[r], multi[r]
        if (o["node"], o["nodes"], o["local"], o["local_size"], o["gpu"]) != (0, 1, r, world, r):
            sys.exit("one node, rank %d: %s (expected node 0 of 1, local rank %d of %d, gpu %d)" % (r, o, r, world, r))
        node, local, size = where[r]
        if (m["node"], m["nodes"], m["local"], m["local_size"], m["gpu"], m["launcher"]) != \
                (node, nodes, local, size, local, "slurm"):
            sys.exit("%s, rank %d: %s (expected node %d of %d, local rank %d of %d, gpu %d)" %
                     (layout, r, m, node, nodes, local, size, local))
        for key in ("data", "zero"):
            if m[key] != o[key]:
                sys.exit("%s, rank %d (node %d, local rank %d): %s '%s' but '%s' on one node" %
                         (layout, r, node, local, key, m[key], o[key]))
    slices = {one[r]["data"] for r in range(world)}
    shards = {one[r]["zero"] for r in range(world)}
    if len(slices) != world or len(shards) != world:
        sys.exit("one node: the ranks' data slices or ZeRO shards are not distinct")
    print("%d ranks on %d nodes (%s): node, local rank and GPU follow the layout; data slices and ZeRO shards are "
          "the one-node run's" % (world, nodes, layout))


def check_checkpoints(one_dir, multi_dir):
    a = sorted(os.path.relpath(p, one_dir) for p in glob.glob(one_dir + "/ckpt_*/*"))
    b = sorted(os.path.relpath(p, multi_dir) for p in glob.glob(multi_dir + "/ckpt_*/*"))
    if a != b or not a:
        sys.exit("checkpoint files differ: %s vs %s" % (a, b))
    for name in a:
        pa, pb = os.path.join(one_dir, name), os.path.join(multi_dir, name)
        if name.endswith("meta.json"):
            ja, jb = json.load(open(pa)), json.load(open(pb))
            for key in ("metrics_bytes", "meta_crc32c"):
                ja.pop(key, None), jb.pop(key, None)
            if ja != jb:
                sys.exit("%s differs" % name)
        elif open(pa, "rb").read() != open(pb, "rb").read():
            sys.exit("%s differs" % name)
    print("%d checkpoint files identical" % len(a))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "placement":
        check_placement(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "checkpoints":
        check_checkpoints(*sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
