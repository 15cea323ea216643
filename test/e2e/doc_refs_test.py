#!/usr/bin/env python3
"""The repository's references to itself: every path a doc or a source file names exists.

Scans README.md, Makefile, the top-level sources and every text file under docs/, llmc/, dev/, test/ and scripts/
(what git tracks plus new files it does not ignore; every file when there is no git) for
  - a path that starts with one of the repository's source directories (llmc/, docs/, test/, dev/, scripts/) and
    names nothing in the repository;
  - the name of a design file kept outside the repository, a build machine's absolute path, or a tracker's issue
    number (the word "issue" followed by a number): a reader of the repository cannot follow them. Cite docs/ or state the fact instead.

Paths that are legitimately absent are handled by rule, not by a list:
  - only paths under the source directories are checked, so build outputs (build/, build-asan/), data (data/),
    runs (runs/, out/) and generated files are never candidates; neither is a path that continues another one
    (`build/test/test_layout`, `$TMP/data`, a URL) or one in another project (`llm.c's dev/data/fineweb.py`);
  - a pattern names at least one file: `*`, Make's `%`, shell and template variables (`$name`, `${x}`, `<name>`,
    `{a,b}`) and upper-case placeholders (`dev/cuda/NAME.cu`) match any name in their place;
  - a name without an extension may be the program built from a source of that name (`dev/cuda/attention` is
    build/cuda-bench/attention, built from dev/cuda/attention.cu).

Run with no argument, it first checks itself on a small tree with planted bad references (each must be reported,
the good ones must not), then checks the repository; it prints PASS/FAIL lines (test/helpers/lib.sh's format).
  doc_refs_test.py [ROOT]      check ROOT only (default: this repository), one line per bad reference
"""
import fnmatch
import os
import re
import subprocess
import sys
import tempfile

SOURCE_DIRS = ("llmc", "docs", "test", "dev", "scripts")
TOP_FILES = ("README.md", "Makefile", "train_gpt2.cu", "test_gpt2.cu")
TEXT_EXTS = {".md", ".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".sh", ".py", ".js", ".list", ".sbatch",
             ".txt", ".supp", ".json", ".toml", ".cfg", ".mk", ""}

# A path: a source directory, then path characters. Not when it continues a word, another path, a variable or a
# URL (the character before is one of these).
PATH_RE = re.compile(r"(?<![\w./$~@:+-])(?:\./)?((?:%s)/[\w./*%%${}<>,+-]*)" % "|".join(SOURCE_DIRS))
# Another project's file: "llm.c's `dev/data/fineweb.py`", "nanoGPT's train.py", "(llm.c: dev/...)", "in llm.c ...".
FOREIGN_RE = re.compile(r"(llm\.c|nanoGPT|torchtitan|PyTorch|karpathy|tiktoken|ggml|HF|Hugging Face)('s)?[`\s(:]*$",
                        re.IGNORECASE)
# Names a reader outside the build machines cannot follow. Written in pieces so this file does not match itself.
DESIGN_FILE_RE = re.compile(r"\bDESIGN" + r"\.md\b", re.IGNORECASE)
MACHINE_PATH_RE = re.compile(r"(?<![\w.$~-])/" + r"work/")
SELF = "test/e2e/doc_refs_test.py"
ISSUE_RE = re.compile(r"\bissues?\s*#?\d+\b", re.IGNORECASE)


def repo_files(root):
    """Relative paths of the files to check and of every file that exists (as a set)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, subdirs, names in os.walk(root):
            subdirs[:] = [s for s in subdirs if not s.startswith(".") and s not in ("build", "build-asan", "data",
                                                                                     "node_modules", "runs", "out")]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(files)


def scanned(path):
    if path in TOP_FILES:
        return True
    if not path.startswith(tuple(d + "/" for d in SOURCE_DIRS)):
        return False
    return os.path.splitext(path)[1] in TEXT_EXTS


def to_glob(ref):
    """The reference as an fnmatch pattern: placeholders become '*'."""
    g = re.sub(r"\$\{[^}]*\}|\$\w+|\$\(|<[^>/]*>|%", "*", ref)
    g = re.sub(r"\{[^}/]*\}", "*", g)
    return "/".join("*" if re.fullmatch(r"[A-Z][A-Z0-9_]*", part) else
                    re.sub(r"\b[A-Z][A-Z0-9_]{1,}\b(?=\.)", "*", part) for part in g.split("/"))


def clean(ref):
    # A comma ends the path unless it is inside a brace list ("$(patsubst dev/cuda/%.cu,$(BUILD)...", "{a,b}").
    depth = 0
    for i, c in enumerate(ref):
        depth += (c == "{") - (c == "}")
        if c == "," and depth <= 0:
            ref = ref[:i]
            break
    # Trailing punctuation of the sentence or the markup, and unbalanced closing brackets.
    ref = ref.rstrip(".,;:'\"`")
    while ref and ref[-1] in ")]}>" and ref.count(ref[-1]) > ref.count({")": "(", "]": "[", "}": "{", ">": "<"}[ref[-1]]):
        ref = ref[:-1].rstrip(".,;:'\"`")
    return ref


def exists(ref, files, dirs):
    ref = ref.rstrip("/")
    if any(c in ref for c in "*$<{%") or re.search(r"(^|/)[A-Z][A-Z0-9_]+(\.|/|$)", ref):
        pat = to_glob(ref)
        return any(fnmatch.fnmatchcase(f, pat) or fnmatch.fnmatchcase(f, pat + "/*") for f in files) or \
            any(fnmatch.fnmatchcase(d, pat) for d in dirs)
    if ref in files or ref in dirs:
        return True
    if not os.path.splitext(os.path.basename(ref))[1]:  # a program named after its source
        return any(f.startswith(ref + ".") and "/" not in f[len(ref):] for f in files)
    return False


def check(root):
    """Every bad reference under root, as 'path:line: message' lines."""
    files = repo_files(root)
    fileset = set(files)
    dirs = {os.path.dirname(f) for f in files}
    dirs |= {"/".join(d.split("/")[:i]) for d in list(dirs) for i in range(1, d.count("/") + 1)}
    problems = []
    for path in files:
        if not scanned(path) or path == SELF:
            continue  # this file's planted references are bad on purpose
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable: not a doc
        for n, line in enumerate(lines, 1):
            where = "%s:%d" % (path, n)
            if DESIGN_FILE_RE.search(line):
                problems.append("%s: names a design file that is not in the repository (cite docs/ or state "
                                "the fact)" % where)
            if MACHINE_PATH_RE.search(line):
                problems.append("%s: names a build machine's path (/%s...)" % (where, "work/"))
            m = ISSUE_RE.search(line)
            if m:
                problems.append("%s: names a tracker's issue ('%s'): say what it means instead" % (where, m.group(0)))
            for m in PATH_RE.finditer(line):
                ref = clean(m.group(1))
                if ref.endswith("/") and ref.count("/") == 1 or "/" not in ref.rstrip("/"):
                    continue  # a directory alone ("test/", "dev/"): always there
                if FOREIGN_RE.search(line[:m.start(1)]):
                    continue
                if not exists(ref, fileset, dirs):
                    problems.append("%s: '%s' does not exist in the repository" % (where, ref))
    return problems


# ---- self-test ----------------------------------------------------------------------------------------------------
PLANTED = {
    "llmc/real.h": "// See docs/real.md and test/unit/test_real.cpp; the kernels live in llmc/cuda/.\n",
    "docs/real.md": "# Real\nBuilt from dev/tools/prog.cpp into ./prog; dev/tools/prog is the program; "
                    "test/unit/test_*.cpp and test/unit/test_%.cpp and dev/tools/NAME.cpp; logs in "
                    "build/test-logs/x.log; data in data/foo/bar.bin; $TMP/llmc/none.h; "
                    "llm.c's `dev/data/fineweb.py`; https://example.com/docs/none.md.\n",
    "test/unit/test_real.cpp": '#include "llmc/real.h"\n',
    "dev/tools/prog.cpp": "// reads scripts/run.sh's output (scripts/run.sh)\n",
    "scripts/run.sh": "bash test/e2e/${name}_test.sh; ./scripts/run.sh (pytorch/pytorch#123, #45)\n",
    "Makefile": "X := $(patsubst dev/tools/%.cpp,$(BUILD)/%,$(wildcard dev/tools/*.cpp)) {test,docs}/x\n",
    "test/e2e/a_test.sh": "source test/helpers/lib.sh  # test/helpers/lib.sh.\n",
    "test/helpers/lib.sh": "# ok\n",
}
BAD = {
    "llmc/bad.h": ("// The step is described in docs/nowhere.md.\n", "'docs/nowhere.md' does not exist"),
    "docs/bad.md": ("Run `test/e2e/missing_test.sh`.\n", "'test/e2e/missing_test.sh' does not exist"),
    "dev/bad.py": ("# see llmc/cuda/none.cuh, for (fused) kernels\n", "'llmc/cuda/none.cuh' does not exist"),
    "scripts/bad.sh": ("# test/unit/test_nothing_*.cpp\n", "'test/unit/test_nothing_*.cpp' does not exist"),
    "test/bad.list": ("# (see DESIGN" + ".md, \"Tests\")\n", "names a design file"),
    "llmc/bad2.h": ("// see /" + "work/contract.md\n", "names a build machine's path"),
    "docs/bad2.md": ("Fixed in (issue " + "12).\n", "names a tracker's issue"),
    "dev/bad3.sh": ("# dev/tools/nothing is the program\n", "'dev/tools/nothing' does not exist"),
    "dev/bad4.sh": ("./scripts/none.sh --help\n", "'scripts/none.sh' does not exist"),
    "README.md": ("Layout: test/lib.sh (moved).\n", "'test/lib.sh' does not exist"),
}


def self_test():
    ok = True
    with tempfile.TemporaryDirectory() as root:
        def write(files):
            for p, text in files.items():
                os.makedirs(os.path.join(root, os.path.dirname(p)), exist_ok=True)
                with open(os.path.join(root, p), "w") as f:
                    f.write(text)
        write(PLANTED)
        os.makedirs(os.path.join(root, "llmc/cuda"))
        open(os.path.join(root, "llmc/cuda/k.cuh"), "w").close()
        good = check(root)
        print(("PASS" if not good else "FAIL") + " self-test: the good references are accepted"
              + ("" if not good else ": " + "; ".join(good)))
        ok &= not good
        write({p: text for p, (text, _) in BAD.items()})
        found = check(root)
        for p, (_, want) in BAD.items():
            hit = [x for x in found if x.startswith(p + ":") and want in x]
            print(("PASS" if hit else "FAIL") + " self-test: a planted bad reference is reported (%s: %s)"
                  % (p, want) + ("" if hit else ", got: " + "; ".join(found)))
            ok &= bool(hit)
        extra = [x for x in found if not any(x.startswith(p + ":") for p in BAD)]
        print(("PASS" if not extra else "FAIL") + " self-test: nothing else is reported"
              + ("" if not extra else ": " + "; ".join(extra)))
        ok &= not extra
    return ok


def main():
    if len(sys.argv) > 1:
        problems = check(sys.argv[1])
        print("\n".join(problems))
        return 1 if problems else 0
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ok = self_test()
    problems = check(root)
    if problems:
        for p in problems:
            print("FAIL doc reference: " + p)
    else:
        print("PASS every path the docs and sources name exists; no outside design file, machine path or issue number")
    return 0 if ok and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
