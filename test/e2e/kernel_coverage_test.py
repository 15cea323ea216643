#!/usr/bin/env python3
"""Every kernel in the nvcc object is launched somewhere in the suite: a kernel only nvcc compiles and no simulated
test runs (a fallback path, an instantiation for another device or head size) is code that no test has executed.

  kernel_coverage_test.py OBJECT LAUNCH_LOG

OBJECT: the nvcc object of the CUDA backend (its cubins: every kernel instantiated for sm_80 and sm_90); LAUNCH_LOG:
the CUDASIM_LAUNCH_LOG lines the simulated tests of this run appended (test/run_tests.sh sets it for every test).
One PASS or FAIL line per architecture, naming the kernels never launched; first a check that the comparison can
fail (a log without one of the kernels)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resource_check_test as rc  # noqa: E402

failures = 0


def report(ok, name, why=""):
    global failures
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
    failures += 0 if ok else 1


def never_launched(kernels, launched):
    return sorted(set(kernels) - launched)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[3].strip())
    obj, log = sys.argv[1:]
    records = rc.kernel_records(obj)
    if not records:
        report(False, "kernels in %s" % obj, "no cubin with kernels found")
        return 1
    if not os.path.exists(log):
        report(False, "launch log %s" % log, "missing: no simulated test ran with CUDASIM_LAUNCH_LOG")
        return 1
    launched = {kernel for (_, kernel) in rc.read_launches(log)}
    any_arch = sorted(records)[0]
    planted = launched - {sorted(records[any_arch])[0]}
    report(bool(never_launched(records[any_arch], planted)),
           "the check fails on a launch log without %s" % sorted(records[any_arch])[0], "it passed")
    for arch, kernels in sorted(records.items()):
        missing = never_launched(kernels, launched)
        report(not missing, "sm_%d: all %d kernels of the nvcc object launched by the simulated tests" % (arch, len(kernels)),
               "%d never launched: %s" % (len(missing), ", ".join(missing)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
