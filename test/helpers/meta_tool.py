#!/usr/bin/env python3
"""Edit a checkpoint's meta.json and give it a valid checksum again, as a deliberate forger would: the tests use it
to check what the trainer validates beyond the checksum (llmc/checkpoint_format.cpp, llmc/trainer_resume.h, docs/checkpoints.md).

  meta_tool.py META.JSON 'PYTHON'        runs PYTHON with `m` bound to the parsed metadata (`p`: the path of
                                         meta.json, `d` its directory, f(name): the entry of a file in m["files"],
                                         refresh(name): sets that entry's size and CRC to the file's), then rewrites
                                         meta.json with a valid checksum
  meta_tool.py --crc FILE                prints FILE's CRC-32C (8 hex digits)

meta.json's checksum ("meta_crc32c") is the CRC-32C of the file's bytes with that value written as "00000000".
"""
import json
import os
import sys

_TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = _TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def write_meta(path, m):
    m["meta_crc32c"] = "00000000"
    text = json.dumps(m, indent=2, sort_keys=True) + "\n"
    crc = "%08x" % crc32c(text.encode())
    text = text.replace('"meta_crc32c": "00000000"', '"meta_crc32c": "%s"' % crc, 1)
    with open(path, "w") as f:
        f.write(text)


def main():
    if sys.argv[1] == "--crc":
        print("%08x" % crc32c(open(sys.argv[2], "rb").read()))
        return
    path, code = sys.argv[1], sys.argv[2]
    m = json.load(open(path))
    d = os.path.dirname(path)

    def f(name):
        return next(x for x in m["files"] if x["name"] == name)

    def refresh(name):  # the entry of a file that was changed on purpose: its size and CRC as it is now
        data = open(os.path.join(d, name), "rb").read()
        f(name)["bytes"], f(name)["crc32c"] = len(data), "%08x" % crc32c(data)

    exec(code, {"m": m, "f": f, "refresh": refresh, "p": path, "d": d})
    write_meta(path, m)


if __name__ == "__main__":
    main()
