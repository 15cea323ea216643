#!/usr/bin/env python3
"""What only a real GPU can confirm of the simulator's device profiles and of the resource check.

1. Device limits: the GPU's own report (CUDA driver API, cuDeviceGetAttribute) against the simulator's profile for
   its architecture (the table in dev/cudasim/device_profile.cpp, read from that file: one source for the figures).
   The architectural limits (shared memory per block default / opt-in / per SM, reserved per block, registers per
   SM / per block, threads per block / per SM, blocks per SM, warp size) must be equal: a difference means the
   profile, and every simulated refusal derived from it, is wrong. The product figures (SM count, L2 size) differ
   between products of one architecture and are printed, not compared.
2. The resource check against the driver: the nvcc build's cubin for this GPU (from the object or binary given,
   cuModuleLoadData) and, for every kernel, the driver's own figures (cuFuncGetAttribute: registers, static shared
   memory, the largest block it can launch) against what test/e2e/resource_check_test.py read from the cubin; then,
   for every launch configuration the simulated profile runs logged (CUDASIM_LAUNCH_LOG) and every
   __launch_bounds__ maximum, the driver must accept the kernel's dynamic shared memory (cuFuncSetAttribute) and fit
   at least one block per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor): what "too many resources requested for
   launch" would refuse. No kernel is launched (its arguments would be garbage); the occupancy calculator applies the
   same per-SM limits as the launch.

Usage: dev/gpu/driver_check.py OBJECT_OR_BINARY LAUNCH_LOG      (on a GPU machine; PASS/FAIL lines, exit 1 on a FAIL)
       dev/gpu/driver_check.py --profiles                     (prints the profiles as read from the simulator)
"""
import ctypes
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import resource_check_test as rc  # noqa: E402  (cubin records, launch log)
import sass_check_test as sass_check  # noqa: E402

# The profile table's fields, in dev/cudasim/device_profile.cpp's order (struct DeviceProfile in dev/cudasim/state.h).
FIELDS = ["arch", "product", "major", "minor", "sm_count", "shared_per_block", "shared_per_block_optin",
          "shared_per_sm", "reserved_shared_per_block", "regs_per_sm", "regs_per_block", "regs_per_thread",
          "max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm", "l2_bytes", "global_memory",
          "clock_khz", "memory_clock_khz", "bus_width_bits"]
# CUdevice_attribute values (cuda.h) of the compared fields, and of the product figures printed.
COMPARED = {"shared_per_block": 8, "shared_per_block_optin": 97, "shared_per_sm": 81,
            "reserved_shared_per_block": 111, "regs_per_sm": 82, "regs_per_block": 12, "max_threads_per_block": 1,
            "max_threads_per_sm": 39, "max_blocks_per_sm": 106}
PRINTED = {"sm_count": 16, "l2_bytes": 38}
ATTR_WARP_SIZE, ATTR_CC_MAJOR, ATTR_CC_MINOR = 10, 75, 76
FUNC_MAX_THREADS, FUNC_SHARED, FUNC_REGS, FUNC_MAX_DYNAMIC_SHARED = 0, 1, 4, 8
failures = 0


def report(ok, name, why=""):
    global failures
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not why else ": " + why))
    failures += not ok


def read_profiles():
    src = open(os.path.join(ROOT, "dev", "cudasim", "device_profile.cpp")).read()
    table = src[src.index("kProfiles[] = {"):]
    table = table[:table.index("};")]
    units = {"KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
    profiles = {}
    for entry in re.findall(r"\{(\"sm_\d+\".*?)\}", table, re.S):
        parts = [p.strip() for p in re.split(r",(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", entry)]
        values = []
        for p in parts:
            if p.startswith('"'):
                values.append(p.strip('"'))
            else:
                m = re.fullmatch(r"(\d+)(?:\s*\*\s*(KiB|MiB|GiB))?", p)
                if not m:
                    sys.exit("driver_check: cannot read %r in device_profile.cpp's table" % p)
                values.append(int(m.group(1)) * units.get(m.group(2), 1))
        if len(values) != len(FIELDS):
            sys.exit("driver_check: a profile has %d fields, expected %d" % (len(values), len(FIELDS)))
        profiles[values[0]] = dict(zip(FIELDS, values))
    return profiles


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.call("cuInit", 0)
        self.dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(self.dev), 0)
        ctx = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), self.dev)
        self.call("cuCtxSetCurrent", ctx)

    def call(self, fn, *args):
        r = getattr(self.cu, fn)(*args)
        if r != 0:
            raise RuntimeError("%s failed with CUresult %d" % (fn, r))

    def attribute(self, attr):
        v = ctypes.c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(v), attr, self.dev)
        return v.value

    def load(self, image):
        mod = ctypes.c_void_p()
        self.call("cuModuleLoadData", ctypes.byref(mod), ctypes.c_char_p(image))
        return mod

    def function(self, mod, mangled):
        f = ctypes.c_void_p()
        self.call("cuModuleGetFunction", ctypes.byref(f), mod, mangled.encode())
        return f

    def func_attribute(self, f, attr):
        v = ctypes.c_int()
        self.call("cuFuncGetAttribute", ctypes.byref(v), attr, f)
        return v.value

    def blocks_per_sm(self, f, threads, dyn):
        n = ctypes.c_int()
        self.call("cuOccupancyMaxActiveBlocksPerMultiprocessor", ctypes.byref(n), f, threads, ctypes.c_size_t(dyn))
        return n.value


def check_limits(drv, profiles):
    arch = "sm_%d%d" % (drv.attribute(ATTR_CC_MAJOR), drv.attribute(ATTR_CC_MINOR))
    prof = profiles.get(arch)
    if prof is None:
        report(False, "device limits: a simulator profile for this GPU's architecture %s" % arch,
               "none (profiles: %s)" % ", ".join(sorted(profiles)))
        return arch
    for field, attr in COMPARED.items():
        got = drv.attribute(attr)
        report(got == prof[field], "device limits %s: %s = %d as the profile says" % (arch, field, prof[field]),
               "the GPU reports %d" % got)
    report(drv.attribute(ATTR_WARP_SIZE) == 32, "device limits %s: warp size 32" % arch)
    for field, attr in PRINTED.items():
        print("INFO device %s: %s %d (the profile's product, %s: %d)" % (arch, field, drv.attribute(attr),
                                                                       prof["product"], prof[field]))
    return arch


def check_kernels(drv, arch, path, launches):
    want = 90 if arch == "sm_90" else 80
    cubins = [elf for a, elf in sass_check.fatbin_cubins(path) if a == want]
    if not cubins:
        report(False, "the build has sm_%d code for %s" % (want, arch), "no sm_%d cubin in %s" % (want, path))
        return
    records = rc.kernel_records(path).get(want, {})
    for elf in cubins:
        mod = drv.load(elf)
        secs = rc.elf_sections(elf)
        mangled = [n[len(".text."):] for n in secs if n.startswith(".text.") and ".nv.info." + n[len(".text."):] in secs]
        names = sass_check.demangle(mangled)
        for m in mangled:
            name = names[m]
            f = drv.function(mod, m)
            regs, static = drv.func_attribute(f, FUNC_REGS), drv.func_attribute(f, FUNC_SHARED)
            max_threads = drv.func_attribute(f, FUNC_MAX_THREADS)
            rec = records.get(name)
            if rec:
                report(rec[0] == regs and rec[1] == static,
                       "%s %s: the driver's registers / static shared memory are the build records' (%d / %d)"
                       % (arch, name, rec[0], rec[1]), "the driver says %d / %d" % (regs, static))
            configs = set(launches.get((arch, name), set()))
            if rec and rec[2]:
                configs.add((rec[2], max((d for _, d in configs), default=0)))
            for threads, dyn in sorted(configs):
                tag = "%s %s: %d threads, %d bytes dynamic shared" % (arch, name, threads, dyn)
                try:
                    if dyn > 48 * 1024:
                        drv.call("cuFuncSetAttribute", f, FUNC_MAX_DYNAMIC_SHARED, dyn)
                    fits = threads <= max_threads and drv.blocks_per_sm(f, threads, dyn) >= 1
                    report(fits, tag + ": the driver can launch it",
                           "largest block %d threads; no block fits an SM" % max_threads)
                except RuntimeError as e:
                    report(False, tag + ": the driver accepts it", str(e))


def main():
    profiles = read_profiles()
    if sys.argv[1:] == ["--profiles"]:
        for arch, p in sorted(profiles.items()):
            print(arch, " ".join("%s=%s" % (k, p[k]) for k in FIELDS[1:]))
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-2].strip())
    obj, log = sys.argv[1:]
    drv = Driver()
    arch = check_limits(drv, profiles)
    check_kernels(drv, arch, obj, rc.read_launches(log) if os.path.exists(log) else {})
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
