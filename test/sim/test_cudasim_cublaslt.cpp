// The simulated cuBLASLt refuses what the real one refuses (docs/cudasim.md, "cuBLASLt"), offers several algorithms
// whose split-K variants change the bits, and the CUDA backend's GEMM runner (llmc/cuda/matmul.cuh) takes its
// fallbacks for misaligned operands (odd element offsets, misaligned bias and aux (pre-GELU) buffers, aux leading
// dimensions that are not multiples of 8) and tunes, records and reuses its algorithm choices (docs/cuda.md, "Tuned
// GEMMs") with an injected timer, so that nothing depends on timings. With the simulator's switches it declines
// fused epilogues (CUDASIM_CUBLASLT_DECLINE) and refuses an offered algorithm (CUDASIM_CUBLASLT_REFUSE_SPLITK): the
// runner counts and reports each decline once per shape and drops a refused candidate for the next.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "dev/cuda/cublaslt_case.h"
#include "llmc/bf16.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/error.h"
#include "test/fixtures/death_test.h"
#include "test/fixtures/testing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using testing::aborts_with;
using testing::check;

namespace {

using bf16 = __nv_bfloat16;
constexpr double U = 1.0 / 256.0;  // bf16 unit roundoff: half an ulp of 8 significant bits

std::vector<float> random_bf16(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = llmc::bf16_to_float(llmc::float_to_bf16(u(rng)));
    return v;
}

// ---- the library's rules, called directly (the same cases dev/cuda/cublaslt_rules.cu asks a real GPU) --------
void test_library_rules() {
    const uint64_t m = 16, n = 8, k = 16;
    bf16* buf = nullptr;
    cudaMalloc(&buf, 4096 * sizeof(bf16));
    cudaMemset(buf, 0, 4096 * sizeof(bf16));
    bf16 *a = buf, *b = buf + 1024, *d = buf + 2048;
    std::printf("  (the cudasim cuBLASLt lines on stderr below are expected)\n");
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        check("aligned operands with the default declared alignment (256 bytes): an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
        check("planted bug, A 2-byte aligned but declared 256 (the default): cublasLtMatmul is "
              "CUBLAS_STATUS_NOT_SUPPORTED", g.heuristic() && g.matmul(a + 1, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
        g.declare_a(2);
        check("A 2-byte aligned and declared so: an algorithm, and it runs",
              g.heuristic() && g.matmul(a + 1, b, d) == CUBLAS_STATUS_SUCCESS);
        g.declare_a(1);
        check("A declared 1-byte aligned (less than a bf16 element): no algorithm", !g.heuristic());
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m + 1);  // ld 17: columns 34 bytes apart, the heuristic picks a 2-byte kernel
        check("an odd leading dimension with aligned pointers: the heuristic picks a kernel for it",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m, 2, (int64_t)(m * k + 1));  // batch entry 1 of A starts 2 bytes off
        g.declare_a(16);
        check("planted bug, a strided batch whose odd stride misaligns entry 1, declared 16: NOT_SUPPORTED",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
        g.declare_a(2);
        check("the same batch declared 2-byte aligned: runs", g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_GELU_AUX);
        g.aux(buf + 3072, (int64_t)m + 2);
        check("GELU_AUX with an aux leading dimension not divisible by 8: no algorithm", !g.heuristic());
        g.aux(buf + 3072, (int64_t)m + 8);
        check("GELU_AUX with aux LD = rows + 8: an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
        g.bias(buf + 3072, CUDA_R_32F);
        check("BGRADB with an fp32 gradient for a bf16 output (the gradient must have the output's type): no algorithm",
              !g.heuristic());
    }
    std::string err;
    check("planted bug, the BIAS epilogue with a bias pointer that is not 16-byte aligned: reported as the device "
          "fault (misaligned address) it is",
          aborts_with([&] {
              CublasLtCase g(m, n, k, (int64_t)m);
              g.epilogue(CUBLASLT_EPILOGUE_BIAS);
              g.bias(buf + 3073, CUDA_R_16BF);
              std::printf("%s\n", g.outcome(a, b, d));
          }, {"misaligned address", "bias"}, err), "stderr: %s", err.c_str());
    cudaFree(buf);
}

// ---- the backend's fallbacks -----------------------------------------------------------------------------------
// out (N, OC) = inp (N, C) @ w^T + bias [then GELU], with every device operand placed `offset` elements into its
// buffer: offset 1 makes it only 2-byte aligned. Compared with a double reference on the same bf16 inputs.
//
// Bound: the fused path rounds out = bf16(dot + b) once; the fallback rounds the GEMM to bf16, adds the bias and
// rounds again: |err| <= U |dot| + U (|dot| + |b|) (1 + U) <= 1.01 U (2 |dot| + |b|). The simulator's GEMM
// accumulates in double, so no accumulation term. With GELU: pre is bounded so, out = bf16(gelu(pre)) adds
// U |gelu| and propagates the pre error by |gelu'| <= 1.13.
void matmul_case(llmc::CudaBackend& be, const char* what, size_t N, size_t C, size_t OC, size_t inp_off,
                 size_t bias_off, size_t out_off, bool gelu) {
    const size_t pad = 8;
    auto inp = random_bf16(N * C, 1), w = random_bf16(OC * C, 2), bias = random_bf16(OC, 3);
    auto* dinp = (bf16*)be.alloc((N * C + pad) * sizeof(bf16));
    auto* dw = (bf16*)be.alloc(OC * C * sizeof(bf16));
    auto* dbias = (bf16*)be.alloc((OC + pad) * sizeof(bf16));
    auto* dout = (bf16*)be.alloc((N * OC + pad) * sizeof(bf16));
    auto* dpre = (bf16*)be.alloc((N * OC + pad) * sizeof(bf16));
    be.upload_floats(dinp + inp_off, inp.data(), inp.size());
    be.upload_floats(dw, w.data(), w.size());
    be.upload_floats(dbias + bias_off, bias.data(), bias.size());
    be.matmul_forward(dout + out_off, dinp + inp_off, dw, dbias + bias_off, N, C, OC,
                      gelu ? dpre + out_off : nullptr);
    std::vector<float> got(N * OC);
    be.download_floats(got.data(), dout + out_off, got.size());
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t o = 0; o < OC; o++) {
            double dot = 0, mag = 0;
            for (size_t c = 0; c < C; c++) {
                dot += (double)inp[i * C + c] * w[o * C + c];
                mag += std::fabs((double)inp[i * C + c] * w[o * C + c]);
            }
            const double pre = dot + bias[o], pre_bound = 1.01 * U * (2 * mag + std::fabs(bias[o]));
            double want = pre, bound = pre_bound;
            if (gelu) {
                want = 0.5 * pre * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (pre + 0.044715 * pre * pre * pre)));
                bound = U * std::fabs(want) + 1.13 * pre_bound;
            }
            if (!(std::fabs(got[i * OC + o] - want) <= bound + 1e-7)) bad++;
        }
    check(std::string("CudaBackend matmul_forward, ") + what + ": right result", bad == 0, "%zu of %zu outside the bound",
          bad, N * OC);
    for (void* p : {(void*)dinp, (void*)dw, (void*)dbias, (void*)dout, (void*)dpre}) be.free(p);
}

void test_backend_fallbacks() {
    llmc::CudaBackend be;
    matmul_case(be, "aligned operands (fused BIAS epilogue)", 9, 32, 24, 0, 0, 0, false);
    matmul_case(be, "planted misalignment, a bias 2 bytes off 16-byte alignment (unfused fallback)", 9, 32, 24, 0, 1, 0,
                false);
    matmul_case(be, "planted misalignment, input and output at odd element offsets", 9, 32, 24, 1, 0, 1, false);
    matmul_case(be, "GELU, aligned (fused GELU_AUX_BIAS)", 9, 32, 24, 0, 0, 0, true);
    matmul_case(be, "planted misalignment, GELU with the pre-GELU (aux) buffer 2 bytes off (fallback)", 9, 32, 24, 0, 0,
                1, true);
    matmul_case(be, "GELU with OC = 20, not a multiple of 8 (fallback)", 9, 32, 20, 0, 0, 0, true);
    matmul_case(be, "odd shapes: N = 7, C = 33, OC = 13, every operand at an odd offset", 7, 33, 13, 1, 1, 1, true);
}


// ---- the epilogues of the backward pass (DGELU, DGELU_BGRAD, BGRADB), called directly ----------------------------
void test_backward_epilogue_rules() {
    const uint64_t m = 16, n = 8, k = 16;
    bf16* buf = nullptr;
    cudaMalloc(&buf, 4096 * sizeof(bf16));
    cudaMemset(buf, 0, 4096 * sizeof(bf16));
    bf16 *a = buf, *b = buf + 1024, *d = buf + 2048, *aux = buf + 3072;
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_DGELU);
        check("DGELU without the aux (pre-GELU) input: no algorithm", !g.heuristic());
        g.aux(aux, (int64_t)m + 2);
        check("DGELU with an aux leading dimension not divisible by 8: no algorithm", !g.heuristic());
        g.aux(aux, (int64_t)m);
        check("DGELU with aux LD = rows (16): an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_DGELU_BGRAD);
        g.aux(aux, (int64_t)m);
        g.bias(buf + 3584, CUDA_R_32F);
        check("DGELU_BGRAD with an fp32 bias gradient for a bf16 output (it must have the output's type): no algorithm",
              !g.heuristic());
        g.bias(buf + 3584, CUDA_R_16BF);
        check("DGELU_BGRAD with a bf16 bias gradient and no workspace: no algorithm (as on a GPU)", !g.heuristic());
        void* ws = nullptr;
        cudaMalloc(&ws, 1u << 20);
        g.workspace(ws, 1u << 20);
        check("DGELU_BGRAD with a bf16 bias gradient and a workspace: an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
        cudaDeviceSynchronize();
        cudaFree(ws);
    }
    {
        CublasLtCase g(m, n, k, (int64_t)m);
        g.epilogue(CUBLASLT_EPILOGUE_BGRADB);
        g.bias(buf + 3584, CUDA_R_16BF);
        check("BGRADB with B not transposed: no algorithm (as on a GPU)", !g.heuristic());
        g.transpose_b();
        check("BGRADB with B transposed and a bias gradient of the output's type: an algorithm, and it runs",
              g.heuristic() && g.matmul(a, b, d) == CUBLAS_STATUS_SUCCESS);
    }
    cudaDeviceSynchronize();
    cudaFree(buf);
}

// ---- several algorithms: the split-K ones change the bits -----------------------------------------------------
// D (m x n) = A (m x k) B (k x n) with k = 1000: the heuristic offers the double-accumulating algorithm and four
// split-K ones; each result is within the fp32 summation bound of the exact one, and the split-K ones do not all
// agree bitwise with the first (their fp32 partial sums round differently), so a choice among them is visible.
void test_several_algorithms() {
    const uint64_t m = 8, n = 8, k = 1000;
    const std::vector<float> av = random_bf16(m * k, 11), bv = random_bf16(k * n, 12);
    std::vector<bf16> ah(av.size()), bh(bv.size());
    for (size_t i = 0; i < av.size(); i++) ah[i] = __float2bfloat16(av[i]);
    for (size_t i = 0; i < bv.size(); i++) bh[i] = __float2bfloat16(bv[i]);
    bf16 *a = nullptr, *b = nullptr;
    float* d = nullptr;
    cudaMalloc(&a, ah.size() * sizeof(bf16));
    cudaMalloc(&b, bh.size() * sizeof(bf16));
    cudaMalloc(&d, m * n * sizeof(float));
    cudaMemcpy(a, ah.data(), ah.size() * sizeof(bf16), cudaMemcpyHostToDevice);
    cudaMemcpy(b, bh.data(), bh.size() * sizeof(bf16), cudaMemcpyHostToDevice);
    cublasLtHandle_t h;
    cublasLtCreate(&h);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, (int64_t)m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, (int64_t)k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, (int64_t)m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t results[8];
    int count = 0;
    cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 8, results, &count);
    check("the heuristic offers 5 algorithms (one, then split-K 2, 4, 8, 16)", count == 5, "got %d", count);
    std::vector<std::vector<float>> outs;
    const float one = 1.0f, zero = 0.0f;
    for (int r = 0; r < count; r++) {
        cublasLtMatmul(h, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &results[r].algo, nullptr, 0, 0);
        std::vector<float> out(m * n);
        cudaMemcpy(out.data(), d, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
        outs.push_back(out);
    }
    size_t differing = 0, outside = 0;
    const double G = 2.0 * (k + 2) * 0x1p-24;  // fp32 summation of k terms, relative to the sum of magnitudes
    for (int r = 1; r < count; r++)
        for (size_t i = 0; i < m * n; i++) {
            if (outs[(size_t)r][i] != outs[0][i]) differing++;
            double mag = 0;
            for (size_t kk = 0; kk < k; kk++) mag += std::fabs((double)av[kk * m + i % m] * bv[(i / m) * k + kk]);
            if (std::fabs(outs[(size_t)r][i] - outs[0][i]) > G * mag) outside++;
        }
    check("split-K results differ bitwise from the first algorithm's somewhere", differing > 0, "none differ");
    check("every split-K result is within the fp32 summation bound of the first", outside == 0, "%zu outside", outside);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
}

// ---- the backend's GEMM tuning ------------------------------------------------------------------------------
// One matmul_backward (dinp, dweight +=, dbias +=; N = 300 rows, so the weight-gradient GEMM sums 300 terms) on fixed
// inputs; returns dinp, dweight and dbias as floats.
struct BackwardRun {
    std::vector<float> dinp, dweight, dbias;
    bool operator==(const BackwardRun& o) const { return dinp == o.dinp && dweight == o.dweight && dbias == o.dbias; }
};
BackwardRun backward_once(llmc::CudaBackend& be) {
    const size_t N = 300, C = 16, OC = 24;
    const auto inp = random_bf16(N * C, 21), w = random_bf16(OC * C, 22), dout = random_bf16(N * OC, 23);
    const auto dw0 = random_bf16(OC * C, 24), db0 = random_bf16(OC, 25);
    auto* d_inp = (bf16*)be.alloc(N * C * sizeof(bf16));
    auto* d_w = (bf16*)be.alloc(OC * C * sizeof(bf16));
    auto* d_dout = (bf16*)be.alloc(N * OC * sizeof(bf16));
    auto* d_dinp = (bf16*)be.alloc(N * C * sizeof(bf16));
    auto* d_dw = (float*)be.alloc(OC * C * sizeof(float));
    auto* d_db = (float*)be.alloc(OC * sizeof(float));
    be.upload_floats(d_inp, inp.data(), inp.size());
    be.upload_floats(d_w, w.data(), w.size());
    be.upload_floats(d_dout, dout.data(), dout.size());
    be.copy_to_device(d_dw, dw0.data(), dw0.size() * sizeof(float));
    be.copy_to_device(d_db, db0.data(), db0.size() * sizeof(float));
    be.matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC);
    BackwardRun r;
    r.dinp.resize(N * C), r.dweight.resize(OC * C), r.dbias.resize(OC);
    be.download_floats(r.dinp.data(), d_dinp, r.dinp.size());
    be.copy_to_host(r.dweight.data(), d_dw, r.dweight.size() * sizeof(float));
    be.copy_to_host(r.dbias.data(), d_db, r.dbias.size() * sizeof(float));
    for (void* p : {(void*)d_inp, (void*)d_w, (void*)d_dout, (void*)d_dinp, (void*)d_dw, (void*)d_db}) be.free(p);
    return r;
}

// A timer that launches each candidate as the real one does (a warm-up and three timed runs: the accumulating GEMM
// runs four times on the real output) and reports `prefer`'s split-K count as the fastest. Counts its calls.
llmc::GemmTimer preferring(int prefer, int* calls) {
    return [prefer, calls](const llmc::GemmCandidate& c, const std::function<void()>& launch) {
        for (int r = 0; r < 4; r++) launch();
        (*calls)++;
        return c.split_k == prefer ? 1.0f : 2.0f + (float)c.index;
    };
}

// The chosen index of every line of a choices text ("gemm <16 numbers> : <index> ...").
std::vector<int> chosen_indices(const std::string& text) {
    std::vector<int> out;
    size_t pos = 0;
    while ((pos = text.find(" : ", pos)) != std::string::npos) {
        out.push_back(std::atoi(text.c_str() + pos + 3));
        pos = text.find('\n', pos);
    }
    return out;
}

void test_gemm_tuning() {
    llmc::BackendOptions off;
    off.gemm_tuning = false;
    llmc::CudaBackend untuned(off);
    int calls_off = 0;
    untuned.set_gemm_timer(preferring(4, &calls_off));
    const BackwardRun base = backward_once(untuned);
    const std::string base_choices = untuned.gemm_choices();
    check("tuning off: the timer is never called, every plan takes the heuristic's first algorithm",
          calls_off == 0 && !chosen_indices(base_choices).empty() &&
              chosen_indices(base_choices) == std::vector<int>(chosen_indices(base_choices).size(), 0),
          "calls %d, choices:\n%s", calls_off, base_choices.c_str());

    llmc::CudaBackend tuned;
    int calls = 0;
    tuned.set_gemm_timer(preferring(4, &calls));
    const BackwardRun t = backward_once(tuned);
    const std::string choices = tuned.gemm_choices();
    check("tuning on: every plan with several algorithms is timed, each candidate once",
          tuned.num_gemm_timed() == tuned.num_gemm_plans() && calls == (int)(5 * tuned.num_gemm_plans()),
          "timed %zu of %zu plans, %d timer calls", tuned.num_gemm_timed(), tuned.num_gemm_plans(), calls);
    check("the timer's fastest (split-K 4, index 2) is chosen for every plan",
          chosen_indices(choices) == std::vector<int>(tuned.num_gemm_plans(), 2), "%s", choices.c_str());
    check("the tuned algorithm changes the bits of dweight (another summation order)", t.dweight != base.dweight);
    double worst = 0;
    for (size_t i = 0; i < t.dweight.size(); i++) worst = std::max(worst, (double)std::fabs(t.dweight[i] - base.dweight[i]));
    // |dweight| <= 1 + 300 terms of magnitude <= 1: two fp32 sums of 300 terms differ by at most 2 G(300) 301.
    check("tuned and untuned dweight agree within two fp32 summation bounds", worst <= 2 * 2.0 * 302 * 0x1p-24 * 301,
          "largest difference %g", worst);

    // A resumed run: the recorded choices are reused without timing, whatever its timer would say, and the results
    // are those of the run that recorded them (which also shows the timing runs left dweight += applied once).
    llmc::CudaBackend resumed;
    int calls_resumed = 0;
    resumed.set_gemm_timer(preferring(16, &calls_resumed));
    resumed.load_gemm_choices(choices);
    const BackwardRun r = backward_once(resumed);
    check("recorded choices are reused: no timing, every plan reused", calls_resumed == 0 &&
          resumed.num_gemm_reused() == resumed.num_gemm_plans() && resumed.num_gemm_timed() == 0,
          "timer calls %d, reused %zu of %zu", calls_resumed, resumed.num_gemm_reused(), resumed.num_gemm_plans());
    check("the reused choices give the recording run's bits (dinp, dweight, dbias)", r == t);
    check("the reused choices are recorded again, the same algorithms",
          chosen_indices(resumed.gemm_choices()) == chosen_indices(choices));

    // A recorded algorithm the heuristic no longer offers (another library or GPU): timed afresh.
    std::string stale = choices;
    const size_t last_word = stale.find('\n') - 1;
    stale[last_word] = stale[last_word] == 'f' ? 'e' : 'f';
    llmc::CudaBackend other;
    int calls_other = 0;
    other.set_gemm_timer(preferring(4, &calls_other));
    other.load_gemm_choices(stale);
    (void)backward_once(other);
    check("a recorded algorithm the heuristic does not offer is timed afresh", other.num_gemm_timed() >= 1 &&
          other.num_gemm_reused() == other.num_gemm_plans() - 1, "timed %zu, reused %zu of %zu", other.num_gemm_timed(),
          other.num_gemm_reused(), other.num_gemm_plans());

    bool threw = false;
    try {
        llmc::CudaBackend bad;
        bad.load_gemm_choices("gemm 1 2 3\n");
    } catch (const llmc::Error& e) {
        threw = std::string(e.what()).find("malformed line \"gemm 1 2 3\"") != std::string::npos;
    }
    check("a malformed choices line is refused, naming the line", threw);
}

// What `body` writes to stderr (fd 2 redirected into a temporary file meanwhile).
std::string captured_stderr(const std::function<void()>& body) {
    std::fflush(stderr);
    FILE* tmp = std::tmpfile();
    const int saved = dup(2);
    dup2(fileno(tmp), 2);
    body();
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string out;
    std::rewind(tmp);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) out.append(buf, n);
    std::fclose(tmp);
    return out;
}
size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) n++;
    return n;
}

// Declined epilogues and refused candidates, injected with the simulator's switches (set for one backend's calls).
void test_injected_declines() {
    llmc::BackendOptions off;
    off.gemm_tuning = false;
    llmc::CudaBackend plain(off);
    const BackwardRun fused = backward_once(plain);

    setenv("CUDASIM_CUBLASLT_DECLINE", "BGRADB", 1);
    llmc::CudaBackend declining(off);
    BackwardRun fallback, again;
    const std::string err = captured_stderr([&] {
        fallback = backward_once(declining);
        again = backward_once(declining);
    });
    unsetenv("CUDASIM_CUBLASLT_DECLINE");
    check("a declined BGRADB is counted once per shape, over two calls", declining.num_gemm_declined() == 1,
          "%zu", declining.num_gemm_declined());
    check("and reported once, naming the epilogue, the shape and the fallback",
          count_of(err, "warning: cuBLASLt declined the BGRADB epilogue for a 16x24x300 GEMM") == 1 &&
              count_of(err, "using the separate pass") == 1,
          "stderr: %s", err.c_str());
    check("the fallback gives the fused run's dinp and dweight bits", fallback.dinp == fused.dinp &&
          fallback.dweight == fused.dweight);
    // dbias: the two-stage column sum (fp32, 300 terms) against the epilogue's sum: within two fp32 summation bounds
    // of 300 terms of magnitude <= 1, on top of the accumulated value (<= 1).
    double worst = 0;
    for (size_t i = 0; i < fused.dbias.size(); i++)
        worst = std::max(worst, (double)std::fabs(fallback.dbias[i] - fused.dbias[i]));
    check("the fallback's dbias agrees with the fused one within two fp32 summation bounds",
          worst <= 2 * 2.0 * 302 * 0x1p-24 * 301, "largest difference %g", worst);
    check("the repeated call gives the same bits", again == fallback);

    setenv("CUDASIM_CUBLASLT_REFUSE_SPLITK", "1", 1);
    llmc::CudaBackend refusing(off);
    BackwardRun r;
    const std::string err2 = captured_stderr([&] { r = backward_once(refusing); });
    check("an algorithm the heuristic offered but cublasLtMatmul refuses is dropped, for every plan",
          refusing.num_gemm_rejected() == refusing.num_gemm_plans() && refusing.num_gemm_declined() == 0,
          "rejected %zu of %zu plans, declined %zu", refusing.num_gemm_rejected(), refusing.num_gemm_plans(),
          refusing.num_gemm_declined());
    check("each dropped candidate is reported", count_of(err2, "warning: cublasLtMatmul refused the heuristic's "
          "candidate 0 (id 1, split-K 1)") == refusing.num_gemm_plans(), "stderr: %s", err2.c_str());
    check("the next candidate (split-K 2) ran: dinp within two fp32 summation bounds of the unsplit one", [&] {
        for (size_t i = 0; i < r.dinp.size(); i++)
            if (std::fabs(r.dinp[i] - fused.dinp[i]) > 2 * U * (std::fabs(fused.dinp[i]) + 1e-3)) return false;
        return r.dinp.size() == fused.dinp.size();
    }());
    // With tuning, the timer's favourite is the refused one: it is dropped and the next fastest chosen.
    llmc::CudaBackend tuned;
    int calls = 0;
    tuned.set_gemm_timer(preferring(1, &calls));
    const std::string err3 = captured_stderr([&] { (void)backward_once(tuned); });
    unsetenv("CUDASIM_CUBLASLT_REFUSE_SPLITK");
    // Each choice line: "... : <index> <candidates> <id> <split-K> ...": 4 candidates left, none the unsplit one.
    bool none_unsplit = true;
    const std::string text = tuned.gemm_choices();
    for (size_t pos = 0; (pos = text.find(" : ", pos)) != std::string::npos; pos = text.find('\n', pos)) {
        int index = 0, count = 0, id = 0, split = 0;
        if (std::sscanf(text.c_str() + pos + 3, "%d %d %d %d", &index, &count, &id, &split) != 4 || count != 4 ||
            split == 1)
            none_unsplit = false;
    }
    check("tuning: a refused candidate is never chosen, whatever its time (the timer favoured it)",
          tuned.num_gemm_rejected() == tuned.num_gemm_plans() && none_unsplit && !text.empty(),
          "rejected %zu of %zu\n%s", tuned.num_gemm_rejected(), tuned.num_gemm_plans(), text.c_str());
}

}  // namespace

int main() {
    test_library_rules();  // its death test forks: before the backend starts OpenMP threads
    test_backward_epilogue_rules();
    test_several_algorithms();
    test_backend_fallbacks();
    test_gemm_tuning();
    test_injected_declines();
    return testing::finish();
}
