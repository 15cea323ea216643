// Benchmark: the four linear layers of a GPT-2 block, forward and backward (llmc/cuda/matmul.cuh, cuBLASLt).
// FLOPs: forward 2 N C OC; backward 4 N C OC (dinp and dweight; the bias column sums are memory-bound extras,
// also timed on their own against the bandwidth).
#include "bench_common.h"
#include "llmc/cuda/matmul.cuh"

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N(), C = s.C;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        llmc::GemmRunner gemm;
        struct Layer { const char* name; size_t in, out; bool gelu; };
        const Layer layers[] = {{"qkv", C, 3 * C, false}, {"attproj", C, C, false}, {"fc (+gelu)", C, 4 * C, true},
                                {"fcproj", 4 * C, C, false}};
        for (const Layer& l : layers) {
            llmc::bf16 *inp = bench::alloc_bf16(N * l.in, 1), *w = bench::alloc_bf16(l.out * l.in, 2, -0.05f, 0.05f);
            llmc::bf16 *bias = bench::alloc_bf16(l.out, 3), *out = bench::alloc_bf16(N * l.out, 4);
            llmc::bf16 *pre = l.gelu ? bench::alloc_bf16(N * l.out, 5) : nullptr, *dout = bench::alloc_bf16(N * l.out, 6);
            llmc::bf16* dinp = bench::alloc_bf16(N * l.in, 7);
            float *dw = bench::alloc_f32(l.out * l.in, 8), *db = bench::alloc_f32(l.out, 9);
            float* partials = bench::alloc_f32(llmc::bias_backward_scratch_floats(N, l.out), 10);
            const double flops = 2.0 * N * l.in * l.out;
            float ms = bench::time_ms([&](cudaStream_t q) {
                llmc::matmul_forward(gemm, out, inp, w, bias, N, l.in, l.out, pre, q);
            }, st);
            bench::report(dev, std::string("matmul_forward ") + l.name, ms, 0, flops);
            ms = bench::time_ms([&](cudaStream_t q) {
                llmc::matmul_backward(gemm, dinp, dw, db, partials, dout, inp, w, N, l.in, l.out, pre, q);
            }, st);
            bench::report(dev, std::string("matmul_backward ") + l.name, ms, 0, 2 * flops);
            // Its memory-bound part: the bias gradient (dout read once, partials written and read, dbias +=).
            ms = bench::time_ms([&](cudaStream_t q) { llmc::bias_backward(db, partials, dout, N, l.out, q); }, st);
            const double G = (double)llmc::bias_backward_row_blocks(N);
            bench::report(dev, std::string("  bias_backward ") + l.name, ms, 2.0 * N * l.out + 8.0 * G * l.out +
                          8.0 * l.out, 0);
            for (void* p : {(void*)inp, (void*)w, (void*)bias, (void*)out, (void*)pre, (void*)dout, (void*)dinp,
                            (void*)dw, (void*)db, (void*)partials})
                if (p) CUDA_CHECK(cudaFree(p));
        }
        std::printf("# %zu cuBLASLt plans cached\n", gemm.num_plans());
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
