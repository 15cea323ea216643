#!/usr/bin/env python3
"""Writes small llm.c-format token shards (magic 20240520) of a learnable synthetic language, for trainer tests.

Documents are sequences over a vocabulary of `vocab` tokens where each next token is a fixed function of the previous
two with a little noise, so a tiny GPT-2 can drive its loss well below log(vocab) in a few dozen steps.
usage: make_synthetic_shards.py OUT_DIR [--vocab 64] [--train-tokens 20000] [--val-tokens 4000] [--seed 1]
"""
import argparse
import os
import random
import struct



def write_shard(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))
    os.replace(tmp, path)


def make_tokens(n, vocab, rng):
    out = []
    while len(out) < n:
        out.append(0)  # document separator
        a, b = rng.randrange(1, vocab), rng.randrange(1, vocab)
        for _ in range(rng.randrange(20, 200)):
            c = (a * 7 + b * 3) % (vocab - 1) + 1 if rng.random() > 0.1 else rng.randrange(1, vocab)
            out.append(c)
            a, b = b, c
    return out[:n]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--train-tokens", type=int, default=20000)
    p.add_argument("--val-tokens", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    write_shard(os.path.join(a.out, "syn_train_000000.bin"), make_tokens(a.train_tokens, a.vocab, rng))
    write_shard(os.path.join(a.out, "syn_val_000000.bin"), make_tokens(a.val_tokens, a.vocab, rng))


if __name__ == "__main__":
    main()
