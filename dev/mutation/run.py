#!/usr/bin/env python3
"""Mutation testing of the CUDA code (`make mutation-test`; docs/cudasim.md, "Mutation testing").

For each planted bug of dev/mutation/mutations.py: apply it to a scratch copy of the tree (build/mutation/tree, whose
build directory is kept between mutations so each rebuild is incremental), build the test programs (the simulator
build; with --nvcc also the CUDA programs, so a planted bug must be valid GPU code too), run the tests (TEST_FILTER, by
default the ones that run CUDA code: the simulator's and the reference test) up to the first failing one, and record
whether any test failed (caught) or all passed (survived). Prints a table and the score; exits
non-zero if a mutation survived or does not build, or a snippet does not match exactly once.

The tests that caught each mutation are kept in build/mutation/caught_by.tsv; a later run builds only the programs
those tests name (test/tests.list, and the scripts it runs) and runs those tests first, alone, and the whole build
and filter only when they pass (a survivor still runs every test), so a re-run costs about one test per mutation.

  python3 dev/mutation/run.py                  every mutation
  python3 dev/mutation/run.py --check          only verify that every snippet matches exactly once
  python3 dev/mutation/run.py --only ID,ID     some mutations
  python3 dev/mutation/run.py --filter "sim"   another test filter (space-separated substrings of test names)
  python3 dev/mutation/run.py --nvcc           also build train_gpt2 / test_gpt2 with nvcc for every mutation
  python3 dev/mutation/run.py --build "T ..."  build only these make targets for each mutation (the programs the
                                               --filter tests run), not every test program
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutations import MUTATIONS  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRATCH = os.path.join(ROOT, "build", "mutation")
TREE = os.path.join(SCRATCH, "tree")
DEFAULT_FILTER = "sim reference"
BUILD_TARGETS = ["test-binaries", "test_gpt2_cpu"]
NVCC_TARGETS = ["train_gpt2", "test_gpt2"]
NVCC_FILTER = "sass_check resource_check"  # the tests that read the nvcc object
CAUGHT_BY = os.path.join(SCRATCH, "caught_by.tsv")  # mutation id, the tests that failed last time (space-separated)


def load_caught_by():
    if not os.path.isfile(CAUGHT_BY):
        return {}
    rows = (line.rstrip("\n").split("\t") for line in open(CAUGHT_BY))
    return {r[0]: r[1] for r in rows if len(r) == 2 and r[1]}


def save_caught_by(caught_by):
    with open(CAUGHT_BY + ".tmp", "w") as f:
        for mid in sorted(caught_by):
            f.write(f"{mid}\t{caught_by[mid]}\n")
    os.replace(CAUGHT_BY + ".tmp", CAUGHT_BY)


def fail(msg):
    print(f"mutation-test: {msg}", file=sys.stderr)
    sys.exit(2)


def check_snippets(mutations):
    bad = []
    ids = set()
    for m in mutations:
        if m.id in ids:
            bad.append(f"{m.id}: duplicate id")
        ids.add(m.id)
        path = os.path.join(ROOT, m.file)
        if not os.path.exists(path):
            bad.append(f"{m.id}: {m.file} does not exist")
            continue
        n = open(path).read().count(m.find)
        if n != 1:
            bad.append(f"{m.id}: the snippet occurs {n} times in {m.file} (expected exactly once)")
    if bad:
        fail("stale mutation list (update dev/mutation/mutations.py):\n  " + "\n  ".join(bad))


def copy_tree():
    """The repository's files (tracked and untracked, not ignored) into TREE; TREE/build is kept."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in files:
        if not f or not os.path.isfile(os.path.join(ROOT, f)):
            continue
        src, dst = os.path.join(ROOT, f), os.path.join(TREE, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.isfile(dst):  # a new scratch tree: keep the mtimes that this checkout's build products match
            shutil.copy2(src, dst)
        elif open(src, "rb").read() != open(dst, "rb").read():
            # A changed file gets a fresh mtime: make then rebuilds what depends on it even when the scratch build
            # is newer than the source's own mtime (copy2 would keep that and leave stale objects in place).
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
    # Start from this checkout's build products, so the first build is incremental too.
    if not os.path.isdir(os.path.join(TREE, "build")) and os.path.isdir(os.path.join(ROOT, "build")):
        shutil.copytree(os.path.join(ROOT, "build"), os.path.join(TREE, "build"), symlinks=True,
                        ignore=shutil.ignore_patterns("mutation", "test-logs", "test-tmp"))


def test_commands():
    """Each test/tests.list entry's name and command, as the runner would run it."""
    shim = ('run() { while [[ $1 == --* ]]; do shift; done; local n=$1; shift; printf "%s\\t%s\\n" "$n" "$*"; }; '
            'quick_if() { :; }; source test/tests.list')
    out = subprocess.run(["bash", "-c", shim], cwd=TREE, check=True, capture_output=True, text=True).stdout
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def programs_of(tests, commands):
    """The built programs that the tests TEST_FILTER=tests selects run (paths in their commands or in the scripts
    these run), or None when one of them names none (then only the whole build is safe)."""
    programs = set()
    matched = [name for name in commands  # the runner's TEST_FILTER rule
               if any(name == word[1:] if word.startswith("=") else word in name for word in tests)]
    for name in matched or [None]:
        text = commands.get(name)
        if text is None:
            return None
        for script in re.findall(r"\b(?:test|dev)/\S+\.(?:sh|py)\b", text):
            if os.path.isfile(os.path.join(TREE, script)):
                text += "\n" + open(os.path.join(TREE, script)).read()
        found = {p.lstrip("./") for p in re.findall(r"(?<![\w/])(?:\./|build/)[\w./-]+", text)}
        found = {p for p in found
                 if os.path.isfile(os.path.join(TREE, p)) and os.access(os.path.join(TREE, p), os.X_OK)}
        if not found:
            return None
        programs |= found
    return sorted(programs)


class BuildError(Exception):
    def __init__(self, log):
        super().__init__("build failed")
        self.log = log


def make(jobs, nvcc=False, build=BUILD_TARGETS):
    targets = list(build) + (NVCC_TARGETS if nvcc else [])
    r = subprocess.run(["nice", "make", f"-j{jobs}", "--no-print-directory"] + targets, cwd=TREE,
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def run_tests(test_filter, timeout_s):
    env = dict(os.environ, TEST_FILTER=test_filter, TEST_FAIL_FAST="1", CUDASIM_NCCL_TIMEOUT_S="60")
    try:
        r = subprocess.run(["bash", "test/run_tests.sh"], cwd=TREE, env=env, capture_output=True, text=True,
                           timeout=timeout_s)
        out, rc, timed_out = r.stdout, r.returncode, False
    except subprocess.TimeoutExpired as e:
        out, rc, timed_out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), -1, True
    failed = [m.group(1) for m in re.finditer(r"^(\S+)\s+\d+ passed\s+([1-9]\d*) failed", out, re.M)]
    total = re.search(r"^(\d+) passed, (\d+) failed, (\d+) skipped", out, re.M)
    return rc, timed_out, failed, total, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="only check that every snippet matches exactly once")
    ap.add_argument("--only", default="", help="comma-separated mutation ids")
    ap.add_argument("--filter", default=DEFAULT_FILTER, help="TEST_FILTER for test/run_tests.sh")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nvcc", action="store_true", help="also build the CUDA programs with nvcc for every mutation")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for one mutation's test run")
    ap.add_argument("--build", default=" ".join(BUILD_TARGETS),
                    help="make targets to build for each mutation, space-separated (default: every test program)")
    args = ap.parse_args()

    mutations = MUTATIONS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m.id for m in MUTATIONS}
        if unknown:
            fail("unknown mutation ids: " + ", ".join(sorted(unknown)))
        mutations = [m for m in MUTATIONS if m.id in wanted]
    check_snippets(MUTATIONS)
    print(f"{len(MUTATIONS)} mutations, every snippet found exactly once")
    if args.check:
        return 0

    os.makedirs(TREE, exist_ok=True)
    copy_tree()
    build = args.build.split()
    ok, log = make(args.jobs, args.nvcc, build)
    if not ok:
        fail("the unmutated scratch tree does not build:\n" + log[-3000:])
    rc, timed_out, failed, total, out = run_tests(args.filter, args.timeout)
    if rc != 0 or failed:
        fail(f"the unmutated tree fails the tests ({', '.join(failed) or 'exit status %d' % rc}):\n" + out[-3000:])
    print(f"unmutated: {total.group(0) if total else '?'} (TEST_FILTER='{args.filter}')")

    results = []
    caught_by = load_caught_by()
    commands = test_commands()
    for m in mutations:
        path = os.path.join(TREE, m.file)
        original = open(path).read()  # the scratch copy, as copied at the start
        with open(path, "w") as f:
            f.write(original.replace(m.find, m.replace, 1))
        t0 = time.time()
        # Class nvcc plants a bug in code only nvcc compiles: nvcc refusing it catches it, else the checks of the
        # nvcc object must.
        nvcc_only = m.cls == "nvcc"
        built = build
        try:
            # Last time's catchers first, alone, with only the programs they run built (the rest stays unmutated).
            catchers = ["=" + t for t in caught_by.get(m.id, "").split()]  # those tests, by exact name
            quick = programs_of(catchers, commands) if catchers and not nvcc_only else None
            built = quick or build  # the programs built with the mutation
            ok, log = make(args.jobs, args.nvcc or nvcc_only, built)
            if not ok:
                raise BuildError(log)
            test_filter = NVCC_FILTER if nvcc_only else args.filter
            failed, rc, timed_out = [], 0, False
            if catchers:
                rc, timed_out, failed, total, out = run_tests(" ".join(catchers), args.timeout)
            if not (failed or rc != 0 or timed_out):
                if built is not build:  # then the whole build
                    built = build
                    ok, log = make(args.jobs, args.nvcc, build)
                    if not ok:
                        raise BuildError(log)
                rc, timed_out, failed, total, out = run_tests(test_filter, args.timeout)
            if failed:
                caught_by[m.id] = " ".join(failed)
                save_caught_by(caught_by)
            if timed_out:
                verdict, by = "caught", "timeout"
            elif failed or rc != 0:
                verdict, by = "caught", ", ".join(failed) or f"exit status {rc}"
            else:
                verdict, by = "SURVIVED", total.group(0) if total else ""
        except BuildError as e:
            errors = [l for l in e.log.splitlines() if re.search(r"error\s*:", l)] or e.log.strip().splitlines()[-1:]
            verdict = "caught" if nvcc_only else "BUILD ERROR"
            by = ("nvcc: " if nvcc_only else "") + (errors[0][:160] if errors else "")
        finally:
            with open(path, "w") as f:
                f.write(original)
            # What was built mutated, rebuilt unmutated (compiler cache hits): a later mutation's quick run must not
            # meet this one's programs.
            make(args.jobs, args.nvcc or nvcc_only, built)
        dt = time.time() - t0
        results.append((m, verdict, by, dt))
        print(f"{verdict:11s} {m.id:42s} {m.cls:9s} {dt:6.0f} s  {by}", flush=True)
    make(args.jobs, build=build)  # leave the scratch build unmutated

    caught = sum(1 for r in results if r[1] == "caught")
    print()
    print("| mutation | class | file | result | failing tests |")
    print("|---|---|---|---|---|")
    for m, verdict, by, _ in results:
        print(f"| {m.id} | {m.cls} | {m.file} | {verdict} | {by} |")
    print(f"\nscore: {caught} of {len(results)} planted bugs caught (TEST_FILTER='{args.filter}')")
    return 0 if caught == len(results) else 1  # a survivor or a mutation that does not build fails the target


if __name__ == "__main__":
    sys.exit(main())
