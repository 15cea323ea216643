#!/usr/bin/env python3
"""function_lengths.py [LIMIT] [FILES...]: lists the functions of llmc/ (or FILES) longer than LIMIT lines (default 80),
from the line of the opening brace to the closing one. Kernels (__global__) are listed apart: they are exempt
(docs/architecture.md, "Code size"). Exit status 1 when a non-kernel function is over the limit and is not in
ALLOWED. A brace-matching scanner, not a C++ parser: comments, strings and character literals are skipped, and a
brace opens a function when the text before it has a parameter list and is not a control statement."""
import glob, re, sys

ALLOWED = {("llmc/cli.cpp", "parse_train_options")}  # the declarative option table
CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|try|catch)\b|\belse\s*$|\)\s*->[^(]*$")
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def strip(text):
    """Blanks comments, strings and character literals, keeping newlines (line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 digit separators
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path).read())
    stack, header_start, line = [], 0, 1  # stack of (kind, name, start line)
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            header_start = i + 1
        elif c == "{":
            header = " ".join(text[header_start:i].split())
            in_function = any(s[0] == "function" for s in stack)
            if in_function:
                kind, name = "block", ""
            elif CONTAINER.search(header) or header.startswith("extern"):
                kind, name = "container", ""
            elif "(" in header and not CONTROL.search(header) and not header.rstrip().endswith("="):
                sig = re.sub(r"__launch_bounds__\s*\([^)]*\)", "", header.split(" : ")[0])
                m = re.search(r"([~\w:]+(?:\s*<[^()]*>)?)\s*\(", sig)  # the name before the first "("
                kind, name = "function", m.group(1) if m else header[:40]
            else:
                kind, name = "block", ""
            stack.append((kind, name, line, "__global__" in header))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, name, start, kernel = stack.pop()
                if kind == "function":
                    yield name, start, line - start + 1, kernel
            header_start = i + 1


def main():
    args = sys.argv[1:]
    limit = int(args.pop(0)) if args and args[0].isdigit() else 80
    files = args or sorted(glob.glob("llmc/**/*.h", recursive=True) + glob.glob("llmc/**/*.cpp", recursive=True) +
                           glob.glob("llmc/**/*.cu", recursive=True) + glob.glob("llmc/**/*.cuh", recursive=True))
    over = 0
    for path in files:
        for name, start, length, kernel in functions(path):
            if length <= limit:
                continue
            exempt = kernel or (path, name) in ALLOWED
            print("%s:%d: %s is %d lines%s" % (path, start, name, length,
                                               " (kernel, exempt)" if kernel else " (exempt)" if exempt else ""))
            over += not exempt
    print("%d function(s) over %d lines" % (over, limit))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
