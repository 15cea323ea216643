// Benchmark: attention forward and backward (llmc/cuda/attention.cuh: materialised T x T scores).
// FLOPs counted as executed (full T x T GEMMs): forward 2 GEMMs = 4 B NH T T hs; backward 4 GEMMs = 8 B NH T T hs.
#include "bench_common.h"
#include "llmc/cuda/attention.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t B = s.B, T = s.T, C = s.C, NH = s.NH, hs = C / NH;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        llmc::GemmRunner gemm;
        llmc::bf16 *qkv = bench::alloc_bf16(B * T * 3 * C, 1), *out = bench::alloc_bf16(B * T * C, 2);
        llmc::bf16 *att = bench::alloc_bf16(B * NH * T * T, 3), *dout = bench::alloc_bf16(B * T * C, 4);
        llmc::bf16 *dqkv = bench::alloc_bf16(B * T * 3 * C, 5);
        llmc::bf16* scratch = bench::alloc_bf16(llmc::attention_scratch_elems(B, T, C, NH), 6);
        const double f = 4.0 * B * NH * T * T * hs;
        float ms = bench::time_ms([&](cudaStream_t q) {
            llmc::attention_forward(gemm, out, att, qkv, scratch, B, T, C, NH, q);
        }, st);
        bench::report(dev, "attention_forward", ms, 0, f);
        ms = bench::time_ms([&](cudaStream_t q) {
            llmc::attention_backward(gemm, dqkv, dout, qkv, att, scratch, B, T, C, NH, q);
        }, st);
        bench::report(dev, "attention_backward", ms, 0, 2 * f);
        const size_t rows = B * NH * T;
        ms = bench::time_ms([&](cudaStream_t q) {
            LLMC_LAUNCH(llmc::causal_softmax_forward_kernel, llmc::grid_size(rows, 8), 256, 0, q, att, rows, T);
        }, st);
        bench::report(dev, "  causal_softmax_forward (part of forward)", ms, 2.0 * 2 * rows * T, 0);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
