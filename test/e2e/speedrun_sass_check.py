#!/usr/bin/env python3
"""The SASS check (test/e2e/sass_check_test.py: its disassembly and rules) on the speedrun recipe's kernels, which
nvcc compiles in their own object, build/cuda/llmc/cuda/speedrun_ops.o: every vector-path instantiation has 128-bit
global loads (and stores, where it stores), the soft-capped classifier's prefetch kernel 128-bit cp.async copies, and
the scalar-path instantiations none (they show the check can fail).

Usage: test/e2e/speedrun_sass_check.py [OBJECT]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_check_test as sass_check  # noqa: E402

# (demangled name, needs a 128-bit store too): W = 8 bf16 (or fp32 pairs of packs) per access, then P for the rows.
sass_check.KERNELS = [
    ("llmc::rmsnorm_forward_kernel<8, 4>", True),
    ("llmc::rmsnorm_backward_kernel<8, 4>", True),
    ("llmc::fused_residual_rmsnorm_forward_kernel<8, 4>", True),
    ("llmc::qk_norm_rotary_forward_kernel<8>", True),
    ("llmc::qk_norm_rotary_backward_kernel<8>", True),
    ("llmc::activation_forward_kernel<8, llmc::Relu2>", True),
    ("llmc::activation_backward_inplace_kernel<8, llmc::Relu2>", True),
    ("llmc::softcap_classifier_kernel<8, 7>", True),
    ("llmc::muon_momentum_kernel<8>", True),
    ("llmc::muon_apply_kernel<8>", True),
    ("llmc::newton_schulz_normalize_kernel<8>", True),
    ("llmc::embed_skip_forward_kernel<8>", True),
    ("llmc::embed_skip_backward_kernel<8>", True),
    ("llmc::value_residual_forward_kernel<8>", True),
    ("llmc::value_residual_backward_kernel<8>", True),
    ("llmc::value_residual_add_kernel<8>", True),
]
sass_check.ASYNC_KERNELS = ["llmc::softcap_classifier_prefetch_kernel<7>"]
sass_check.SCALAR_CONTROLS = [
    "llmc::rmsnorm_forward_kernel<1, 4>",
    "llmc::fused_residual_rmsnorm_forward_kernel<1, 4>",
    "llmc::qk_norm_rotary_backward_kernel<1>",
    "llmc::softcap_classifier_kernel<1, 7>",
    "llmc::muon_apply_kernel<1>",
    "llmc::embed_skip_backward_kernel<1>",
    "llmc::value_residual_backward_kernel<1>",
]

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.argv.append("build/cuda/llmc/cuda/speedrun_ops.o")
    sys.exit(sass_check.main())
