// Peak figures of a GPU computed from its properties (never from a table of product names), for MFU and for the
// kernel benchmarks' "% of peak".
//
// Tensor-core peak (dense bf16, fp32 accumulation):
//   peak = SMs x FLOP per clock per SM (by compute capability) x clock x clock_ratio
// where clock is the maximum boost clock the device reports (cudaDevAttrClockRate) and clock_ratio is, for Hopper,
// the ratio between the clock NVIDIA quotes its tensor peak at and that reported maximum: H100 SXM 989.4 TFLOP/s =
// 132 x 4096 x 1.83 GHz with 1.98 GHz reported (PCIe: 756 = 114 x 4096 x 1.62 GHz, 1.755 GHz reported: the same
// 0.924). A100: 108 x 2048 x 1.41 GHz = 312 TFLOP/s at the reported clock.
// Memory bandwidth: 2 (double data rate) x memory clock x bus width / 8.
#pragma once

namespace llmc {

inline double cuda_peak_bf16_flops(int sm_count, int cc_major, int cc_minor, int clock_khz) {
    double per_clock = 0.0, clock_ratio = 1.0;
    const int cc = 10 * cc_major + cc_minor;
    if (cc == 80) per_clock = 2048;                                // A100 / A800 (GA100)
    else if (cc == 86 || cc == 87 || cc == 89) per_clock = 1024;   // GA10x / AD10x data-centre parts (GeForce: half)
    else if (cc == 90) {                                           // H100 / H200 / H800
        per_clock = 4096;
        clock_ratio = 1830.0 / 1980.0;
    } else if (cc_major == 10) per_clock = 8192;                   // B200 class
    else if (cc_major == 12) per_clock = 1024;                     // RTX Blackwell class
    else if (cc_major == 7) per_clock = 1024;                      // V100 / T4: fp16 tensor cores (no bf16)
    return (double)sm_count * per_clock * (double)clock_khz * 1e3 * clock_ratio;
}

inline double cuda_peak_bandwidth(int memory_clock_khz, int bus_width_bits) {
    return 2.0 * (double)memory_clock_khz * 1e3 * (double)bus_width_bits / 8.0;
}

}  // namespace llmc
