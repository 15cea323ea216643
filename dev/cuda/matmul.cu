// Benchmark: the four linear layers of a GPT-2 block, forward and backward (llmc/cuda/matmul.cuh, cuBLASLt), each
// in the variants that docs/cuda.md ("Tuned GEMMs", "Fused epilogues") compares:
//   tuning off (the heuristic's first algorithm) / on (the fastest of up to 8, timed on first use);
//   backward with separate passes (GELU backward in place, bias column sums) / with the DGELU and BGRADB epilogues /
//   with DGELU but the bias column sums (--bias-grad-epilogue 0).
// FLOPs: forward 2 N C OC; backward 4 N C OC (dinp and dweight). The backward of a layer whose input is a GELU output
// (fcproj) includes turning its dinp into the gradient of the pre-GELU values (DGELU, or the separate pass).
#include "bench_common.h"
#include "llmc/cuda/matmul.cuh"

namespace {

struct Layer { const char* name; size_t in, out; bool gelu_out, gelu_in, bias = true; };

void bench_layer(const bench::Device& dev, llmc::GemmRunner& gemm, const char* variant, const Layer& l, size_t N,
                 cudaStream_t st) {
    llmc::bf16 *inp = bench::alloc_bf16(N * l.in, 1), *w = bench::alloc_bf16(l.out * l.in, 2, -0.05f, 0.05f);
    llmc::bf16 *bias = bench::alloc_bf16(l.out, 3), *out = bench::alloc_bf16(N * l.out, 4);
    llmc::bf16 *pre = l.gelu_out ? bench::alloc_bf16(N * l.out, 5) : nullptr, *dout = bench::alloc_bf16(N * l.out, 6);
    llmc::bf16 *dinp = bench::alloc_bf16(N * l.in, 7), *pre_in = l.gelu_in ? bench::alloc_bf16(N * l.in, 11) : nullptr;
    float *dw = bench::alloc_f32(l.out * l.in, 8), *db = bench::alloc_f32(l.out, 9);
    float* partials = bench::alloc_f32(llmc::bias_backward_scratch_floats(N, l.out), 10);
    const double flops = 2.0 * N * l.in * l.out;
    float ms = bench::time_ms([&](cudaStream_t q) {
        llmc::matmul_forward(gemm, out, inp, w, l.bias ? bias : nullptr, N, l.in, l.out, pre, q);
    }, st);
    bench::report(dev, std::string("matmul_forward ") + l.name + " [" + variant + "]", ms, 0, flops);
    ms = bench::time_ms([&](cudaStream_t q) {
        llmc::matmul_backward(gemm, dinp, dw, l.bias ? db : nullptr, partials, dout, inp, w, N, l.in, l.out, nullptr,
                              pre_in, q);
    }, st);
    bench::report(dev, std::string("matmul_backward ") + l.name + " [" + variant + "]", ms, 0, 2 * flops);
    for (void* p : {(void*)inp, (void*)w, (void*)bias, (void*)out, (void*)pre, (void*)dout, (void*)dinp,
                    (void*)pre_in, (void*)dw, (void*)db, (void*)partials})
        if (p) CUDA_CHECK(cudaFree(p));
}

}  // namespace

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N(), C = s.C;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        const Layer layers[] = {{"qkv", C, 3 * C, false, false}, {"attproj", C, C, false, false},
                                {"fc (+gelu)", C, 4 * C, true, false}, {"fcproj (dinp into gelu)", 4 * C, C, false, true}};
        struct Variant { const char* name; bool tuning, epilogues, bias_grad_epilogue; };
        const Variant variants[] = {{"untuned, separate passes", false, false, false},
                                    {"untuned, fused epilogues", false, true, true},
                                    {"tuned, separate passes", true, false, false},
                                    {"tuned, fused epilogues", true, true, true},
                                    {"tuned, DGELU fused, bias gradient by column sums", true, true, false}};
        for (const Variant& v : variants) {
            llmc::GemmRunner gemm(v.tuning);
            gemm.set_backward_epilogues(v.epilogues);
            gemm.set_bias_grad_epilogue(v.bias_grad_epilogue);
            for (const Layer& l : layers) bench_layer(dev, gemm, v.name, l, N, st);
            std::printf("# [%s] %zu cuBLASLt plans, %zu timed; choices:\n%s", v.name, gemm.num_plans(),
                        gemm.num_timed(), gemm.choices().c_str());
        }
        // The lm_head's GEMMs: one chunk of the classifier's rows (4096, the trainer's default --classifier-chunk),
        // logits (4096, Vp) = x wte^T, no bias; a step runs N / 4096 of them.
        {
            llmc::GemmRunner gemm(true);
            const size_t rows = std::min<size_t>(4096, N);
            bench_layer(dev, gemm, "tuned, one 4096-row chunk", {"lm_head", C, s.Vp, false, false, false}, rows, st);
            std::printf("# lm_head: %zu chunks per step\n", llmc::ceil_div(N, rows));
        }
        // The memory-bound pass the BGRADB epilogue replaces, on its own against the bandwidth.
        const size_t OC = 4 * C;
        llmc::bf16* dout = bench::alloc_bf16(N * OC, 6);
        float *db = bench::alloc_f32(OC, 9), *partials = bench::alloc_f32(llmc::bias_backward_scratch_floats(N, OC), 10);
        const float ms = bench::time_ms([&](cudaStream_t q) { llmc::bias_backward(db, partials, dout, N, OC, q); }, st);
        const double G = (double)llmc::bias_backward_row_blocks(N);
        bench::report(dev, "bias_backward fc (the pass BGRADB replaces)", ms, 2.0 * N * OC + 8.0 * G * OC + 8.0 * OC, 0);
        for (void* p : {(void*)dout, (void*)db, (void*)partials}) CUDA_CHECK(cudaFree(p));
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
