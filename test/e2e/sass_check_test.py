#!/usr/bin/env python3
"""The SASS check: every memory-bound kernel's vector path really uses 128-bit global loads (and stores).

The kernels move 16 bytes per access on their vector path (llmc/cuda/common.cuh: Pack, load_floats, RowSlice); a
change that makes nvcc split those accesses (a lost alignment guarantee, a pointer cast, a struct that is no longer
16-byte aligned) would still compute the right numbers, so no simulator test could notice. This test disassembles the
nvcc-built object (no GPU needed) for each architecture in its fatbinary (sm_80 and sm_90) and checks, for each
kernel in KERNELS below, that its SASS has a 128-bit global load (LDG.E.128 and its variants: LDG.E.128.CONSTANT,
LDG.E.EL.128, ...) and, where listed, a 128-bit global store (STG.E.128). A kernel missing from the SASS fails too,
so a renamed or deleted kernel has to be taken off (or renamed in) the list on purpose. Kernels in ASYNC_KERNELS load
through shared memory with cp.async: they need 128-bit LDGSTS copies and 128-bit stores instead.

Negative controls: the scalar-path instantiations (W = 1) must have no 128-bit global access. They show that the
check tells the two apart (it can fail), and that the host really has a different path to fall back on.

Disassembler: the toolkit's `cuobjdump -sass` when it is installed and can read the object. The build machines'
CUDA 13 installation has no cuobjdump (nor nvdisasm), and Debian packages only the CUDA 11.8 tools
(nvidia-cuda-toolkit, non-free), whose cuobjdump cannot parse CUDA 13 fatbinaries; scripts/install_deps.sh unpacks
that package's nvdisasm. For it, the ELF cubins are taken out of the object's .nv_fatbin section (ELF entries are
stored uncompressed) and their header is rewritten from the ELF ABI version 8 that CUDA >= 12.8 writes (architecture
in bits 8-15 of e_flags) to version 7 (architecture in bits 0-7 and 16-23, plus the 64-bit-address and unified
texture-mode flags), which is all that 11.8 does not understand: the machine code of sm_80 and sm_90 is fixed by the
hardware and 11.8's disassembler knows both.

Usage: test/e2e/sass_check_test.py [OBJECT_OR_BINARY]   (default build/cuda/llmc/cuda/cuda_backend.o)
Prints PASS/FAIL lines (test/run_tests.sh counts them); exits non-zero on any failure.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

# (demangled kernel name, needs a 128-bit store too). The template arguments name the vector instantiation:
# W = 8 (bf16) or 4 (fp32) elements per access, then P (packs kept in registers) for the row kernels.
KERNELS = [
    ("llmc::encoder_forward_kernel<8>", True),
    ("llmc::encoder_backward_wpe_kernel<8>", True),
    ("llmc::encoder_backward_wte_chunks_kernel<8>", True),
    ("llmc::encoder_backward_wte_slots_kernel<8>", True),
    ("llmc::layernorm_forward_kernel<8, 4>", True),
    ("llmc::fused_residual_layernorm_forward_kernel<8, 4>", True),
    ("llmc::layernorm_backward_kernel<8, 4>", True),
    ("llmc::activation_forward_kernel<8, llmc::Gelu>", True),
    ("llmc::activation_backward_inplace_kernel<8, llmc::Gelu>", True),
    ("llmc::add_bias_kernel<8>", True),
    ("llmc::bias_backward_partials_kernel<8>", True),
    ("llmc::fused_classifier_kernel<8, 7>", True),
    ("llmc::adamw_kernel<8>", True),
    ("llmc::sum_partials_kernel<false, 4>", False),
    ("llmc::sum_partials_kernel<true, 4>", False),
    ("llmc::column_sums_into_kernel<4>", True),
    # Its store is one row per 32 rows read (1/32 of its bytes): the loads are what must be 128-bit.
    ("llmc::column_segment_sums_kernel<4>", False),
    ("llmc::convert_kernel<4, true, float, float>", True),
    ("llmc::convert_kernel<8, false, __nv_bfloat16, float>", True),
    ("llmc::convert_kernel<8, false, float, __nv_bfloat16>", True),
]
# Kernels whose 16-byte loads go through shared memory by cp.async (LDGSTS.E.BYPASS.128 and its variants) and that
# store 128-bit: the classifier's prefetch kernel (its plain loads are only the packs beyond the registers), the
# attention backward's dQ kernel.
ASYNC_KERNELS = [
    "llmc::fused_classifier_prefetch_kernel<7>",
    "llmc::attention_backward_dq_kernel<64, 64>",  # Q, dO, K and V by cp.async, dq rows in 16-byte stores
]
# Scalar-path instantiations: must have no 128-bit global load or store.
SCALAR_CONTROLS = [
    "llmc::activation_forward_kernel<1, llmc::Gelu>",
    "llmc::layernorm_backward_kernel<1, 4>",
    "llmc::fused_classifier_kernel<1, 7>",
    "llmc::adamw_kernel<1>",
    "llmc::encoder_backward_wte_chunks_kernel<1>",
]
ARCHS = ["sm_80", "sm_90"]
NVDISASM_CANDIDATES = ["/usr/local/lib/llmc-nvdisasm/nvdisasm"]

failures = 0


def report(ok, name, why=""):
    global failures
    if ok:
        print("PASS " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


def cuda_tool(name):
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for p in (os.path.join(home, "bin", name), shutil.which(name)):
        if p and os.access(p, os.X_OK):
            return p
    return None


def parse_sass(text, arch=None):
    """{(arch, mangled function): [opcode, ...]} from cuobjdump -sass or nvdisasm output."""
    funcs = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"code for (sm_\d+)", line)
        if m:
            arch, cur = m.group(1), None
            continue
        m = re.search(r"Function : (\S+)", line) or re.match(r"\s*\.section\s+\.text\.([^,\s]+)", line)
        if m:
            cur = (arch, m.group(1))
            funcs.setdefault(cur, [])
            continue
        if re.match(r"\s*\.section\s", line):
            cur = None
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m and cur:
            funcs[cur].append(m.group(1))
    return funcs


def sass_with_cuobjdump(path):
    tool = cuda_tool("cuobjdump")
    if not tool:
        return None
    r = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
    if r.returncode != 0 or "Function :" not in r.stdout:
        print("# cuobjdump could not read %s (%s); trying nvdisasm" % (path, r.stderr.strip()[:200]))
        return None
    print("# disassembler: %s -sass" % tool)
    return parse_sass(r.stdout)


def fatbin_cubins(path):
    """[(arch number, ELF bytes)] of the ELF entries of the .nv_fatbin section of an object or executable."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", path, out], check=True)
        data = open(out, "rb").read()
    cubins, off = [], 0
    while off + 16 <= len(data):  # one or more fatbins, each: header, then entries
        magic, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, off)
        if magic != 0xBA55ED50:
            break
        pos, end = off + header_size, off + header_size + fat_size
        while pos < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, pos)
            arch = struct.unpack_from("<I", data, pos + 28)[0]
            if kind == 2:  # ELF (PTX entries are kind 1 and compressed)
                cubins.append((arch, data[pos + entry_header:pos + entry_header + payload]))
            pos += entry_header + payload
        off = end
    return cubins


def as_abi7(elf, arch):
    """The cubin with its header in the ELF ABI version 7 form that CUDA 11.8's tools read."""
    b = bytearray(elf)
    if b[:4] != b"\x7fELF":
        raise ValueError("fatbin entry for sm_%d is not an ELF file" % arch)
    if b[8] >= 8:
        b[8] = 7
        # EF_CUDA_SM<arch> | EF_CUDA_TEXMODE_UNIFIED (0x100) | EF_CUDA_64BIT_ADDRESS (0x400) | virtual arch << 16
        struct.pack_into("<I", b, 0x30, arch | 0x100 | 0x400 | (arch << 16))
    return bytes(b)


def sass_with_nvdisasm(path):
    tool = os.environ.get("LLMC_NVDISASM")
    if not tool:
        tool = next((p for p in NVDISASM_CANDIDATES if os.access(p, os.X_OK)), None) or cuda_tool("nvdisasm")
    if not tool:
        return None
    print("# disassembler: %s on the cubins of %s's fatbinary" % (tool, path))
    funcs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arch, elf in fatbin_cubins(path):
            cubin = os.path.join(tmp, "sm_%d.cubin" % arch)
            open(cubin, "wb").write(as_abi7(elf, arch))
            r = subprocess.run([tool, cubin], capture_output=True, text=True)
            if r.returncode != 0:
                report(False, "nvdisasm sm_%d" % arch, r.stderr.strip()[:300])
                continue
            funcs.update(parse_sass(r.stdout, "sm_%d" % arch))
    return funcs


def demangle(names):
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    out = r.stdout.split("\n")
    # c++filt prints "void llmc::f<8>(args)": keep the qualified name with its template arguments.
    result = {}
    for mangled, d in zip(names, out):
        d = re.sub(r"^void ", "", d.strip())
        depth, cut = 0, len(d)
        for i, ch in enumerate(d):
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            elif ch == "(" and depth == 0:
                cut = i
                break
        result[mangled] = d[:cut]
    return result


def wide(opcode, prefix):
    parts = opcode.split(".")
    return parts[0] == prefix and "128" in parts[1:]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/cuda/llmc/cuda/cuda_backend.o"
    if not os.path.exists(path):
        report(False, "sass_check", "%s does not exist (build it first: make %s)" % (path, path))
        return 1
    funcs = sass_with_cuobjdump(path) or sass_with_nvdisasm(path)
    if not funcs:
        report(False, "sass_check", "no disassembler: neither cuobjdump (CUDA toolkit) nor nvdisasm (Debian's "
               "nvidia-cuda-toolkit, unpacked by scripts/install_deps.sh into /usr/local/lib/llmc-nvdisasm)")
        return 1
    names = demangle(sorted({f for _, f in funcs}))
    by_name = {}
    for (arch, f), ops in funcs.items():
        by_name.setdefault((arch, names[f]), []).extend(ops)
    for arch in ARCHS:
        if not any(a == arch for a, _ in by_name):
            report(False, "sass %s" % arch, "no %s code in %s" % (arch, path))
            continue
        for kernel, store in KERNELS:
            ops = by_name.get((arch, kernel))
            name = "sass %s %s: 128-bit global loads%s" % (arch, kernel, " and stores" if store else "")
            if ops is None:
                report(False, name, "kernel not found in the SASS")
                continue
            loads = sum(wide(o, "LDG") for o in ops)
            stores = sum(wide(o, "STG") for o in ops)
            ok = loads > 0 and (stores > 0 or not store)
            report(ok, name + " (%d LDG.128, %d STG.128)" % (loads, stores),
                   "%d 128-bit loads, %d 128-bit stores; global accesses: %s" % (
                       loads, stores, sorted({o for o in ops if o.startswith(("LDG", "STG"))})))
        for kernel in ASYNC_KERNELS:
            ops = by_name.get((arch, kernel))
            name = "sass %s %s: 128-bit cp.async copies and global stores" % (arch, kernel)
            if ops is None:
                report(False, name, "kernel not found in the SASS")
                continue
            copies = sum(wide(o, "LDGSTS") for o in ops)
            stores = sum(wide(o, "STG") for o in ops)
            report(copies > 0 and stores > 0, name + " (%d LDGSTS.128, %d STG.128)" % (copies, stores),
                   "global accesses: %s" % sorted({o for o in ops if o.startswith(("LDG", "STG"))}))
        for kernel in SCALAR_CONTROLS:
            ops = by_name.get((arch, kernel))
            name = "sass %s %s (scalar path): no 128-bit global access" % (arch, kernel)
            if ops is None:
                report(False, name, "kernel not found in the SASS")
                continue
            n = sum(wide(o, "LDG") or wide(o, "STG") for o in ops)
            report(n == 0, name, "%d 128-bit accesses" % n)
    print("# %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
