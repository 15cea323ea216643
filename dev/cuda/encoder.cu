// Benchmark: encoder forward and backward (llmc/cuda/encoder.cuh). Memory-bound: rates are against peak bandwidth.
// dwte is timed on two batches: uniform random tokens (most tokens once or twice) and a skewed one like real text
// (Zipf frequencies, one token 30% of the positions), which the chunked gather must handle as fast.
#include <chrono>
#include <random>
#include <vector>

#include "bench_common.h"
#include "llmc/cuda/encoder.cuh"

// dwte: the host grouping (timed on the CPU) and the two-stage gather. Bytes: dout (2 N C), the grouping (ints),
// and a read + write of the fp32 dwte row of every distinct token (8 C each) plus the chunk sums of the frequent ones.
static void bench_dwte(const bench::Device& dev, const char* what, const std::vector<int>& h_tok, size_t Vp, size_t C,
                       const llmc::bf16* dout, float* dwte, cudaStream_t st) {
    const size_t N = h_tok.size();
    std::vector<int> packed(llmc::encoder_max_group_ints(N)), count(Vp, 0), next(Vp, 0);
    auto t0 = std::chrono::steady_clock::now();
    const llmc::EncoderGroupSizes g = llmc::encoder_group_positions(packed.data(), h_tok.data(), N, count.data(),
                                                                     next.data(), Vp);
    double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const llmc::EncoderGroups view = llmc::encoder_group_views(packed.data(), g);
    size_t distinct = g.num_multi;  // the tokens with several chunks, plus those with one (chunk_slot < 0)
    for (size_t k = 0; k < g.num_chunks; k++) distinct += view.chunk_slot[k] < 0;
    std::printf("%-48s %9.3f ms  (host; %zu distinct tokens, %zu chunks, %zu tokens in several chunks)\n",
                (std::string(what) + " grouping").c_str(), host_ms, distinct, g.num_chunks, g.num_multi);
    int* groups;
    float* slots;
    CUDA_CHECK(cudaMalloc(&groups, packed.size() * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&slots, llmc::encoder_max_slots(N) * C * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(groups, packed.data(), g.ints() * sizeof(int), cudaMemcpyHostToDevice));
    float ms = bench::time_ms([&](cudaStream_t q) { llmc::encoder_backward_wte(dwte, slots, dout, groups, g, C, q); },
                              st);
    const double bytes = 2.0 * N * C + 4.0 * g.ints() + 8.0 * distinct * C + 8.0 * g.num_slots * C;
    bench::report(dev, std::string(what) + " gather", ms, bytes, 0);
    CUDA_CHECK(cudaFree(groups));
    CUDA_CHECK(cudaFree(slots));
}

int main(int argc, char** argv) {
    try {
        bench::Device dev = bench::device();
        bench::Shape s = bench::shape(argc, argv);
        const size_t N = s.N(), C = s.C;
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        int* tok = bench::alloc_tokens(N, 1, (int)s.V);
        llmc::bf16 *wte = bench::alloc_bf16(s.Vp * C, 2), *wpe = bench::alloc_bf16(s.T * C, 3);
        llmc::bf16 *out = bench::alloc_bf16(N * C, 4), *dout = bench::alloc_bf16(N * C, 5);
        float *dwte = bench::alloc_f32(s.Vp * C, 6), *dwpe = bench::alloc_f32(s.T * C, 7);
        // Forward: the tokens (4 N), the gathered wte rows (2 N C), wpe (2 T C), out (2 N C).
        float ms = bench::time_ms([&](cudaStream_t q) { llmc::encoder_forward(out, tok, wte, wpe, s.B, s.T, C, q); }, st);
        bench::report(dev, "encoder_forward", ms, 4.0 * N + 4.0 * N * C + 2.0 * s.T * C, 0);
        ms = bench::time_ms([&](cudaStream_t q) { llmc::encoder_backward_wpe(dwpe, dout, s.B, s.T, C, q); }, st);
        bench::report(dev, "encoder_backward dwpe", ms, 2.0 * N * C + 8.0 * s.T * C, 0);

        std::vector<int> uniform(N), skewed(N);
        CUDA_CHECK(cudaMemcpy(uniform.data(), tok, N * sizeof(int), cudaMemcpyDeviceToHost));
        std::mt19937_64 rng(7);
        std::vector<double> w(s.V - 1);
        for (size_t r = 0; r + 1 < s.V; r++) w[r] = 1.0 / (double)(r + 1);
        std::discrete_distribution<int> zipf(w.begin(), w.end());
        std::bernoulli_distribution frequent(0.3);
        for (auto& t : skewed) t = frequent(rng) ? 0 : 1 + zipf(rng);
        bench_dwte(dev, "encoder_backward dwte, uniform tokens,", uniform, s.Vp, C, dout, dwte, st);
        bench_dwte(dev, "encoder_backward dwte, Zipf + one token 30%,", skewed, s.Vp, C, dout, dwte, st);
    } catch (const llmc::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
