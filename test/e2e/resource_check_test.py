#!/usr/bin/env python3
"""The resource check: every kernel of the nvcc build fits every device profile with the launches the code makes.

A launch that asks an SM for more registers or shared memory than it has fails only on hardware ("too many resources
requested for launch", cudaErrorLaunchOutOfResources; "invalid argument" for shared memory); the simulator cannot see
registers (g++ compiles the kernels). This check combines:
  - the nvcc build's own records of each kernel, for each architecture of its fatbinary (sm_80 code also runs on
    sm_86/89): the register count ptxas allocated (bits 24-31 of the kernel's .text section's sh_info, what
    `cuobjdump --dump-resource-usage` and `-Xptxas -v` print), its static shared memory (the size of its
    .nv.shared.<kernel> section) and its __launch_bounds__ maximum block size (EIATTR_MAX_THREADS in
    .nv.info.<kernel>); the build machine has no cuobjdump, so the ELF is read directly (test/e2e/sass_check_test.py extracts
    the cubins);
  - the launches the code makes: every (kernel, threads per block, dynamic shared bytes) of the simulated trainer's
    runs under each device profile (CUDASIM_LAUNCH_LOG, written by test/e2e/sim_device_profiles_test.sh).
For each profile (docs/cudasim.md: the CUDA C++ Programming Guide's per-compute-capability limits):
  - registers: ptxas allocates per warp in units of 256 (regs x 32 rounded up to 256), so a block needs
    ceil(threads / 32) x that, which must be <= 65536 (a block must fit one SM); at most 255 per thread;
  - for a kernel with __launch_bounds__(N): the same at N threads (the largest block the code may launch), and every
    observed launch <= N;
  - for every observed launch: the registers at its block size, static + dynamic shared memory <= the opt-in limit;
  - a kernel launched with more than one block size (chosen at run time) must declare __launch_bounds__.
Kernels neither launched by the scenario nor bounded are listed in one SKIP line (their block sizes are unknown).

Usage: test/e2e/resource_check_test.py OBJECT LAUNCH_LOG      (prints PASS/FAIL/SKIP lines, exits non-zero on a failure)
       test/e2e/resource_check_test.py --self-test            (the check's rules on planted records: they must fail)
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_check_test as sass_check  # noqa: E402  (fatbin_cubins, demangle)

KiB = 1024
# arch: (cubin architecture it runs, shared memory opt-in per block, registers per block, max threads per block)
PROFILES = {
    "sm_80": (80, 163 * KiB, 65536, 1024),
    "sm_86": (80, 99 * KiB, 65536, 1024),
    "sm_89": (80, 99 * KiB, 65536, 1024),
    "sm_90": (90, 227 * KiB, 65536, 1024),
}
EIATTR_MAX_THREADS = 0x05
# An sm_90 cubin's .nv.shared.<kernel> section starts with the 1 KiB the system reserves per block, which ptxas -v
# does not count (nor does the opt-in limit): a kernel with `__shared__ float s[100]` has a 1424-byte section and
# "400 bytes smem" from -Xptxas -v (checked with nvcc 13 for sm_80 and sm_90; registers and __launch_bounds__ agree too).
SM90_SECTION_RESERVED = 1024
failures = 0


def report(ok, name, why=""):
    global failures
    if ok:
        print("PASS " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


def elf_sections(elf):
    """{name: (offset, size, info)} of an ELF64 file's sections."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = raw[shstrndx][4]
    out = {}
    for name, _typ, _flags, _addr, off, size, _link, info, _align, _ent in raw:
        end = elf.index(b"\0", strtab + name)
        out[elf[strtab + name:end].decode()] = (off, size, info)
    return out


def max_threads(info):
    """EIATTR_MAX_THREADS (x, y, z) of a .nv.info.<kernel> section, or None. Entries: format byte, attribute byte,
    then a 2-byte value (formats 1-3) or a 2-byte size and that many bytes (format 4, EIFMT_SVAL)."""
    p = 0
    while p + 4 <= len(info):
        fmt, attr = info[p], info[p + 1]
        if fmt == 4:
            size, = struct.unpack_from("<H", info, p + 2)
            if attr == EIATTR_MAX_THREADS and size >= 12:
                x, y, z = struct.unpack_from("<III", info, p + 4)
                return x * y * z
            p += 4 + size
        else:
            p += 4
    return None


EIATTR_REGCOUNT = 0x2F


def elf_symbols(elf, secs_raw=None):
    """[names] of the ELF's .symtab entries, by index."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    for _name, typ, _f, _a, off, size, link, _info, _al, ent in raw:
        if typ != 2:  # SHT_SYMTAB
            continue
        stroff = raw[link][4]
        names = []
        for k in range(size // 24):
            st_name, = struct.unpack_from("<I", elf, off + k * 24)
            names.append(elf[stroff + st_name:elf.index(b"\0", stroff + st_name)].decode())
        return names
    return []


def register_counts(elf, secs):
    """{mangled kernel: registers} from EIATTR_REGCOUNT entries (symbol index, count) of the global .nv.info (absent
    from a cubin without kernels, such as the one of a translation unit that defines none)."""
    if ".nv.info" not in secs:
        return {}
    off, size, _ = secs[".nv.info"]
    info, syms, out, p = elf[off:off + size], elf_symbols(elf), {}, 0
    while p + 4 <= len(info):
        fmt, attr = info[p], info[p + 1]
        if fmt == 4:
            n, = struct.unpack_from("<H", info, p + 2)
            if attr == EIATTR_REGCOUNT and n == 8:
                sym, regs = struct.unpack_from("<II", info, p + 4)
                if sym < len(syms):
                    out[syms[sym]] = regs
            p += 4 + n
        else:
            p += 4
    return out


def kernel_records(path):
    """{cubin arch: {kernel name: (registers, static shared bytes, launch bound or None)}}."""
    records = {}
    for arch, elf in sass_check.fatbin_cubins(path):
        secs = elf_sections(elf)
        regcount = register_counts(elf, secs)
        kernels = {}
        for name, (off, size, info) in secs.items():
            if not name.startswith(".text."):
                continue
            mangled = name[len(".text."):]
            if ".nv.info." + mangled not in secs:  # device functions have no .nv.info: only kernels do
                continue
            ioff, isize, _ = secs[".nv.info." + mangled]
            shared = secs.get(".nv.shared." + mangled, (0, 0, 0))[1]
            if arch >= 90 and shared >= SM90_SECTION_RESERVED:
                shared -= SM90_SECTION_RESERVED
            if mangled not in regcount:
                report(False, "sm_%d %s: register count in the build's records" % (arch, mangled), "not found")
                continue
            kernels[mangled] = (regcount[mangled], shared, max_threads(elf[ioff:ioff + isize]))
        names = sass_check.demangle(list(kernels))
        records[arch] = {names[m]: v for m, v in kernels.items()}
    return records


def read_launches(path):
    """{(profile, kernel): {(threads, dynamic bytes)}} from CUDASIM_LAUNCH_LOG lines."""
    launches = {}
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 4:
            continue
        prof, kernel, threads, dyn = parts
        kernel = kernel[5:] if kernel.startswith("void ") else kernel
        launches.setdefault((prof, kernel), set()).add((int(threads), int(dyn)))
    return launches


def block_registers(regs, threads):
    per_warp = (regs * 32 + 255) // 256 * 256
    return (threads + 31) // 32 * per_warp


def check(records, launches):
    """Applies the rules; returns the names of the kernels it could not cover."""
    uncovered = set()
    for prof, (arch, optin, regs_limit, threads_limit) in PROFILES.items():
        kernels = records.get(arch)
        if kernels is None:
            report(False, "%s: the build has sm_%d code" % (prof, arch), "no sm_%d cubin in the object" % arch)
            continue
        for kernel, (regs, static, bound) in sorted(kernels.items()):
            seen = launches.get((prof, kernel), set())
            tag = "%s %s (%d registers, %d bytes static shared)" % (prof, kernel, regs, static)
            if regs > 255:
                report(False, tag, "more than 255 registers per thread")
            if bound is not None:
                need = block_registers(regs, bound)
                report(need <= regs_limit and bound <= threads_limit,
                       "%s: __launch_bounds__(%d) fits (%d of %d registers)" % (tag, bound, need, regs_limit),
                       "%d threads x %d registers need %d registers, the SM has %d" % (bound, regs, need, regs_limit))
            elif len({t for t, _ in seen}) > 1:
                report(False, "%s: a run-time block size declares __launch_bounds__" % tag,
                       "launched with %s threads but declares no __launch_bounds__" % sorted({t for t, _ in seen}))
            elif not seen:
                uncovered.add(kernel)
            for threads, dyn in sorted(seen):
                need = block_registers(regs, threads)
                ok_regs = need <= regs_limit and threads <= threads_limit and (bound is None or threads <= bound)
                ok_smem = static + dyn <= optin
                report(ok_regs and ok_smem, "%s: launch of %d threads, %d bytes dynamic shared fits" % (tag, threads, dyn),
                       ("%d registers needed of %d; " % (need, regs_limit) if not ok_regs else "") +
                       ("%d + %d bytes of shared memory exceed the %d a block can have" % (static, dyn, optin)
                        if not ok_smem else "") +
                       ("; above its __launch_bounds__(%d)" % bound if bound is not None and threads > bound else ""))
    return uncovered


def self_test():
    """Planted records the rules must refuse (the check itself can fail)."""
    global failures
    planted = [
        ("the classifier at 1024 threads with 65 registers",
         {80: {"k": (65, 256, 1024)}, 90: {"k": (65, 256, 1024)}}, {}),
        ("a kernel with 100 KiB of dynamic shared memory on sm_86",
         {80: {"k": (32, 0, None)}, 90: {"k": (32, 0, None)}}, {("sm_86", "k"): {(256, 100 * KiB)}}),
        ("a run-time block size without __launch_bounds__",
         {80: {"k": (32, 0, None)}, 90: {"k": (32, 0, None)}}, {("sm_90", "k"): {(96, 0), (256, 0)}}),
        ("a launch above the kernel's __launch_bounds__",
         {80: {"k": (32, 0, 256)}, 90: {"k": (32, 0, 256)}}, {("sm_80", "k"): {(512, 0)}}),
    ]
    ok_all = True
    for name, records, launches in planted:
        saved = failures
        out = sys.stdout
        sys.stdout = open(os.devnull, "w")
        try:
            check(records, launches)
        finally:
            sys.stdout.close()
            sys.stdout = out
        caught = failures > saved
        failures = saved
        report(caught, "resource check refuses a planted record: " + name, "not refused")
        ok_all = ok_all and caught
    saved = failures
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        check({80: {"k": (64, 256, 1024)}, 90: {"k": (64, 256, 1024)}}, {("sm_86", "k"): {(1024, 99 * KiB - 256)}})
    finally:
        sys.stdout.close()
        sys.stdout = out
    fine = failures == saved
    failures = saved
    report(fine, "resource check accepts 1024 threads at 64 registers and shared memory at the sm_86 limit",
           "refused")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(1 if failures else 0)
    if len(sys.argv) != 3:
        sys.exit("usage: resource_check_test.py OBJECT LAUNCH_LOG | --self-test")
    obj, log = sys.argv[1:]
    for p in (obj, log):
        if not os.path.exists(p):
            report(False, "resource check input " + p, "missing (build the nvcc objects; run sim_device_profiles)")
            sys.exit(1)
    records = kernel_records(obj)
    launches = read_launches(log)
    known = {k for arch in records.values() for k in arch}
    for prof, kernel in sorted(launches):
        if kernel not in known:
            report(False, "%s %s: launched under the simulator, found in the nvcc build" % (prof, kernel),
                   "no such kernel in %s" % obj)
    uncovered = check(records, launches)
    if uncovered:
        print("SKIP %d kernels neither launched by the profile scenario nor bounded by __launch_bounds__ (block size "
              "unknown to the check): %s" % (len(uncovered), ", ".join(sorted(uncovered))))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
