#!/usr/bin/env python3
"""Same runs, same bits: runs a fixed set of small training runs and dry runs with the built trainers and saves their
outputs, or reruns them and compares the outputs with a saved set byte for byte. For a change that must not change
behaviour (a refactoring): save with the binaries before it, compare with the binaries after it.

usage: dev/bit_identity.py save DIR [--only WORD ...]      run every case, keep the outputs in DIR
       dev/bit_identity.py compare DIR [--only WORD ...]   run every case into a scratch folder, compare with DIR
options: --cpu PATH (./train_gpt2_cpu)  --sim PATH (build/train_gpt2_sim)  --scratch DIR  --keep

What is compared, per run: metrics.jsonl without its timings (ms, tokens_per_sec, mfu), model.bin, every checkpoint
file (meta.json without its checksum and metrics.jsonl's length, which follow the timings), and the console output
with timings, ETA and the run's folder left out. Per dry run: the printed plan. A resume case continues a checkpoint
of an earlier case on another world size; in compare mode it runs twice, from the fresh checkpoint and from the saved
one, so a checkpoint written by the old binary must resume to the same bits.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MODEL = ["-e", "L=2,NH=2,C=32,T=16,V=64", "-t", "16", "-v", "4", "-m", "2", "-s", "0", "-l", "3e-3", "-c", "0.1",
         "--threads", "1"]


def case(name, binary, np, args, resume_of=None):
    return {"name": name, "bin": binary, "np": np, "args": args, "resume_of": resume_of}


CASES = [
    case("cpu_1", "cpu", 1, ["-b", "2", "-d", "64", "-x", "8", "-n", "4"]),
    case("cpu_1_z2_r2", "cpu", 1, ["-b", "2", "-d", "64", "-x", "4", "-z", "2", "-r", "2"]),
    case("sim_1", "sim", 1, ["-b", "2", "-d", "64", "-x", "6", "-n", "3"]),
    case("cpu_3_z0", "cpu", 3, ["-b", "2", "-d", "192", "-x", "8", "-n", "4", "-z", "0"]),
    case("cpu_3_z1", "cpu", 3, ["-b", "2", "-d", "192", "-x", "8", "-n", "4", "-z", "1"]),
    case("cpu_3_z2", "cpu", 3, ["-b", "2", "-d", "192", "-x", "8", "-n", "4", "-z", "2"]),
    case("cpu_3_bf16", "cpu", 3, ["-b", "2", "-d", "192", "-x", "8", "-z", "1", "--reduce-dtype", "bf16"]),
    case("sim_3_z2", "sim", 3, ["-b", "2", "-d", "192", "-x", "4", "-n", "2", "-z", "2"]),
    case("cpu_4_sg2", "cpu", 4, ["-b", "2", "-d", "256", "-x", "8", "-n", "4", "-z", "1", "--shard-group", "2"]),
    case("cpu_4_sg2_z2", "cpu", 4, ["-b", "2", "-d", "256", "-x", "8", "-z", "2", "--shard-group", "2",
                                    "--reduce-dtype", "bf16"]),
    case("cpu_2_sync", "cpu", 2, ["-b", "2", "-d", "128", "-x", "8", "-n", "4", "--sync-every", "2"]),
    case("cpu_4_sync_sg2", "cpu", 4, ["-b", "2", "-d", "256", "-x", "8", "-n", "4", "--sync-every", "2",
                                      "--shard-group", "2"]),
    case("cpu_4_ckpt", "cpu", 4, ["-b", "1", "-d", "192", "-x", "4", "-n", "4", "-z", "1"]),
    case("cpu_4_to_3", "cpu", 3, ["-b", "1", "-d", "192", "-x", "8", "-n", "4", "-z", "1", "-y", "1"], "cpu_4_ckpt"),
    case("cpu_4_ckpt_z2", "cpu", 4, ["-b", "1", "-d", "192", "-x", "4", "-n", "4", "-z", "2"]),
    case("cpu_4_to_3_z2", "cpu", 3, ["-b", "1", "-d", "192", "-x", "8", "-z", "2", "-y", "1"], "cpu_4_ckpt_z2"),
    case("cpu_sync_ckpt", "cpu", 4, ["-b", "1", "-d", "128", "-x", "4", "-n", "4", "--sync-every", "2",
                                     "--shard-group", "2"]),
    case("cpu_sync_4_to_2", "cpu", 2, ["-b", "1", "-d", "128", "-x", "8", "-n", "4", "--sync-every", "2", "-y", "1"],
         "cpu_sync_ckpt"),
    # The speedrun recipe (Muon on the block matrices): its own model class, ops and optimizer groups.
    case("cpu_speedrun", "cpu", 1, ["-b", "2", "-d", "64", "-x", "6", "-n", "3", "--recipe", "speedrun", "-c", "0",
                                    "--value-residual", "1", "--embed-skip", "1"]),
    case("sim_speedrun", "sim", 1, ["-b", "2", "-d", "64", "-x", "4", "--recipe", "speedrun", "-c", "0", "-r", "2"]),
    case("cpu_3_speedrun_z1", "cpu", 3, ["-b", "2", "-d", "192", "-x", "6", "-z", "1", "--recipe", "speedrun",
                                         "-c", "0"]),
]

DRY_RUNS = {
    "dry_speedrun_d12": ("cpu", ["-e", "d12", "-b", "4", "-t", "1024", "-pn", "8", "-z", "1", "--recipe", "speedrun",
                                 "-c", "0"]),
    "dry_d12_z0": ("cpu", ["-e", "d12", "-b", "4", "-t", "1024", "-pn", "8", "-z", "0"]),
    "dry_d12_z1": ("cpu", ["-e", "d12", "-b", "4", "-t", "1024", "-pn", "8", "-z", "1"]),
    "dry_d12_z2": ("sim", ["-e", "d12", "-b", "4", "-t", "1024", "-pn", "8", "-z", "2", "-r", "2"]),
    "dry_sg8": ("sim", ["-e", "d12", "-b", "4", "-t", "1024", "-pn", "16", "--shard-group", "8",
                        "--reduce-dtype", "bf16"]),
    "dry_sync": ("cpu", ["-e", "d6", "-b", "2", "-t", "256", "-pn", "4", "--sync-every", "4"]),
    "dry_sync_sg2": ("sim", ["-e", "d6", "-b", "2", "-t", "256", "-pn", "4", "--sync-every", "4",
                             "--shard-group", "2"]),
}


def launch(binary, np, args, cwd, log):
    cmd = [binary] + args
    if np > 1 or binary.endswith("_sim"):
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1", "-x",
               "CUDA_VISIBLE_DEVICES=0", "-np", str(np)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="0")
    with open(log, "w") as out:
        rc = subprocess.call(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        sys.exit("%s failed (exit %d): %s" % (" ".join(cmd), rc, open(log).read()[-2000:]))


def run_case(c, root, bins, source=None):
    """Runs case c in root (cwd: root, output runs/<name>). A resume case starts from a copy of `source`, the
    earlier case's output folder."""
    out = os.path.join(root, "runs", c["name"])
    shutil.rmtree(out, ignore_errors=True)
    if c["resume_of"]:
        shutil.copytree(source or os.path.join(root, "runs", c["resume_of"]), out)
    args = ["-i", "data/syn_train_*.bin", "-j", "data/syn_val_*.bin"] + MODEL + c["args"] + ["-o", out]
    launch(bins[c["bin"]], c["np"], args, root, os.path.join(root, c["name"] + ".log"))


def make_data(root):
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.check_call([sys.executable, os.path.join(here, "..", "test", "helpers", "make_synthetic_shards.py"),
                           os.path.join(root, "data"), "--vocab", "64", "--train-tokens", "20000", "--val-tokens",
                           "2000"], stdout=subprocess.DEVNULL)


def clean_log(text, name):
    text = re.sub(r"\S*/runs/%s\b" % re.escape(name), "OUT", text)
    return "".join(re.sub(r"\|\s*[0-9.]+ ms.*$", "", line) + "\n"  # step lines: timings, throughput, ETA
                   for line in text.splitlines())


def metrics_without_timings(path):
    rows = []
    for line in open(path):
        r = json.loads(line)
        for k in ("ms", "tokens_per_sec", "mfu"):
            r.pop(k, None)
        rows.append(r)
    return rows


def meta_without_timings(path):
    m = json.load(open(path))
    m.pop("meta_crc32c", None)
    m.pop("metrics_bytes", None)
    return m


def outputs(run_dir):
    """Relative paths of the files a run leaves that are compared."""
    files = []
    for d, _, names in os.walk(run_dir):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), run_dir)
            if rel.startswith("previous_") or n.endswith(".lock") or n.startswith("gemm_choices"):
                continue
            files.append(rel)
    return sorted(files)


def compare_run(name, ref_root, new_root, ref_name=None):
    ref = os.path.join(ref_root, "runs", ref_name or name)
    new = os.path.join(new_root, "runs", name)
    problems = []
    a, b = outputs(ref), outputs(new)
    if a != b:
        problems.append("files differ: %s" % sorted(set(a) ^ set(b)))
    for rel in sorted(set(a) & set(b)):
        p, q = os.path.join(ref, rel), os.path.join(new, rel)
        if rel == "metrics.jsonl":
            same = metrics_without_timings(p) == metrics_without_timings(q)
        elif rel.endswith("meta.json"):
            same = meta_without_timings(p) == meta_without_timings(q)
        else:
            same = open(p, "rb").read() == open(q, "rb").read()
        if not same:
            problems.append(rel + " differs")
    ref_log = clean_log(open(os.path.join(ref_root, (ref_name or name) + ".log")).read(), ref_name or name)
    new_log = clean_log(open(os.path.join(new_root, name + ".log")).read(), name)
    if ref_log != new_log:
        problems.append("console output differs: %s" % first_difference(ref_log, new_log))
    return problems


def first_difference(a, b):
    for x, y in zip(a.splitlines(), b.splitlines()):
        if x != y:
            return "\n      was: %s\n      now: %s" % (x, y)
    return "one has more lines"


def dry_run(name, spec, root, bins):
    binary, args = spec
    launch(bins[binary], 1, ["--dry-run"] + args, root, os.path.join(root, name + ".log"))


def selected(name, only):
    return not only or any(w in name for w in only)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["save", "compare"])
    p.add_argument("dir")
    p.add_argument("--cpu", default="./train_gpt2_cpu")
    p.add_argument("--sim", default="build/train_gpt2_sim")
    p.add_argument("--scratch", help="where compare runs (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    p.add_argument("--only", nargs="*", default=[])
    a = p.parse_args()
    bins = {"cpu": os.path.abspath(a.cpu), "sim": os.path.abspath(a.sim)}
    ref = os.path.abspath(a.dir)
    root = ref if a.mode == "save" else os.path.abspath(a.scratch or tempfile.mkdtemp(prefix="bit_identity_"))
    os.makedirs(root, exist_ok=True)
    make_data(root)
    failed = 0
    wanted = {c["name"] for c in CASES if selected(c["name"], a.only)}
    wanted |= {c["resume_of"] for c in CASES if c["name"] in wanted and c["resume_of"]}
    for c in CASES:
        if c["name"] not in wanted:
            continue
        runs = [(c["name"], None)]
        if a.mode == "compare" and c["resume_of"]:  # also from the saved checkpoint, to the same bits
            runs.append((c["name"] + "_from_saved", os.path.join(ref, "runs", c["resume_of"])))
        for name, source in runs:
            run_case(dict(c, name=name), root, bins, source)
            if a.mode == "compare":
                problems = compare_run(name, ref, root, c["name"])
                failed += bool(problems)
                print("%-22s %s" % (name, "same bits" if not problems else "DIFFERENT"))
                for pr in problems:
                    print("    " + pr)
            else:
                print("%-22s saved" % name)
    for name, spec in DRY_RUNS.items():
        if not selected(name, a.only):
            continue
        dry_run(name, spec, root, bins)
        if a.mode == "compare":
            same = open(os.path.join(ref, name + ".log")).read() == open(os.path.join(root, name + ".log")).read()
            failed += not same
            print("%-22s %s" % (name, "same plan" if same else "DIFFERENT"))
    if a.mode == "compare" and not a.keep and not a.scratch:
        shutil.rmtree(root)
    if failed:
        sys.exit("%d case(s) differ" % failed)
    print("all cases %s" % ("saved in " + ref if a.mode == "save" else "give the same bits"))


if __name__ == "__main__":
    main()
