// Matmuls through cuBLASLt, and the small kernels around them.
//
// Row-major model convention (weights (OC, C) as in the model file):
//   forward:  out (N,OC) = inp (N,C) @ w^T + bias        [+ GELU: pre_gelu = that, out = gelu(pre_gelu)]
//   backward: dinp (N,C)     = dout @ w                    written (=), bf16; [* gelu'(dinp_pre_gelu): DGELU epilogue,
//                                                          when the layer's input was gelu(dinp_pre_gelu)]
//             dweight (OC,C) += dout^T @ inp               fp32, straight into the gradient (beta = 1)
//             dbias (OC)     += column sums of dout        fp32: the same GEMM's BGRADB epilogue (into scratch, as it
//                                                          overwrites), added; fallback: a two-stage column sum
// cuBLASLt is column-major: a row-major (R, K) matrix is a column-major K x R matrix with ld = K, so each row-major
// product is computed as its transpose, D^T = op(A) op(B). The mapping of each call is written next to it.
// All GEMMs accumulate in fp32 (CUBLAS_COMPUTE_32F) and scale in fp32.
//
// GemmRunner caches one plan (descriptor, four layouts, the heuristic's algorithms and the chosen one) per distinct call
// shape, so a training step builds nothing after the first one. The pointer alignments are part of the key: cuBLASLt's heuristic chooses kernels for a
// declared minimum alignment (and the bias / aux pointers set before the query), so a plan is only reused for
// pointers at least as aligned.
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common.cuh"
#include "gemm_tuning.h"
#include "gelu.cuh"
#include "reduce.cuh"

namespace llmc {

// One GEMM: D = alpha op(A) op(B) + beta C, column-major, m x n result, k inner.
// A, B are bf16; C/D are bf16 or fp32 (d_type); C is D (in place accumulation when beta = 1).
struct GemmArgs {
    void* d = nullptr;
    const void* a = nullptr;
    const void* b = nullptr;
    bool trans_a = false, trans_b = false;
    size_t m = 0, n = 0, k = 0;
    size_t lda = 0, ldb = 0, ldd = 0;
    float alpha = 1.0f, beta = 0.0f;
    cudaDataType_t d_type = CUDA_R_16BF;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    // The *_BIAS epilogues read a bias (m, bf16); the bias-gradient ones (BGRADB: n, DGELU_BGRAD: m) write one, of
    // the output's type (cuBLASLt's rule: Ctype).
    const void* bias = nullptr;
    cudaDataType_t bias_type = CUDA_R_16BF;
    void* aux = nullptr;  // bf16 (m x n, ld = ldd): GELU_AUX* write the pre-GELU values into it, DGELU* read them
};

// GemmRunner caches one plan per distinct call shape (see the file comment). On a plan's first run it chooses among
// up to kMaxCandidates algorithms of the heuristic: with tuning on, the fastest by the timer (ties: the earlier in the
// heuristic's order), else the heuristic's first; a choice recorded by an earlier run (load_choices) is reused
// without timing when the heuristic still offers that exact algorithm. choices() records every choice.
class GemmRunner {
public:
    static constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt recommends for Hopper
    static constexpr int kMaxCandidates = 8;
    static constexpr int kTimingReps = 3;

    explicit GemmRunner(bool tuning = true) : tuning_(tuning) {
        CUBLAS_CHECK(cublasLtCreate(&handle_));
        CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
        timer_ = [this](const GemmCandidate& c, const std::function<void()>& launch) { return time_events(c, launch); };
    }
    ~GemmRunner() {
        for (auto& kv : plans_) destroy(kv.second);
        if (events_[0]) cudaEventDestroy(events_[0]);
        if (events_[1]) cudaEventDestroy(events_[1]);
        if (workspace_) cudaFree(workspace_);
        if (handle_) cublasLtDestroy(handle_);
    }
    GemmRunner(const GemmRunner&) = delete;
    GemmRunner& operator=(const GemmRunner&) = delete;

    // Runs the GEMM; returns false (and runs nothing) when cuBLASLt has no algorithm for this configuration, or when
    // a fused epilogue's bias or aux pointer is not 16-byte aligned, so that the caller can fall back to a plainer
    // epilogue. cuBLASLt's alignment preferences do not cover those two pointers: the heuristic may pick a kernel
    // that assumes 16 bytes and then fault on the device (pytorch#194497), so the check is ours. A fused epilogue
    // declined either way is reported once per shape (stderr, num_declined()): the fallback passes cost time that
    // the step's figures would otherwise hide. A candidate the heuristic offered but cublasLtMatmul rejects is
    // dropped like one never offered (reported once), and the next one runs.
    bool try_run(const GemmArgs& g, cudaStream_t stream) {
        if ((g.bias && (uintptr_t)g.bias % 16 != 0) || (g.aux && (uintptr_t)g.aux % 16 != 0))
            return declined(g, "its bias or aux pointer is not 16-byte aligned");
        auto it = plan(g);
        Plan& p = it->second;
        if (p.chosen < 0 && !p.algos.empty()) choose(it->first, p, g, stream);
        while (!p.algos.empty()) {
            const cublasStatus_t st = launch(p, g, p.chosen, stream);
            if (st == CUBLAS_STATUS_SUCCESS) return true;
            drop_candidate(p, g, (size_t)p.chosen, st);
            p.chosen = fastest(p);
        }
        p.chosen = -1;
        return declined(g, "cuBLASLt offers no algorithm");
    }
    void run(const GemmArgs& g, cudaStream_t stream) {
        if (!try_run(g, stream))
            fail("cuBLASLt has no algorithm for a %zux%zux%zu GEMM (trans %d%d, epilogue %d)", g.m, g.n, g.k,
                 (int)g.trans_a, (int)g.trans_b, (int)g.epilogue);
    }
    size_t num_plans() const { return plans_.size(); }
    size_t num_timed() const { return timed_; }        // plans whose algorithm was chosen by timing
    size_t num_reused() const { return reused_; }      // plans that took a recorded choice
    size_t num_declined() const { return declined_.size(); }  // shapes whose fused epilogue fell back
    size_t num_rejected() const { return rejected_; }  // candidates cublasLtMatmul refused (dropped)
    void set_tuning(bool on) { tuning_ = on; }
    // The backward's fused epilogues (DGELU, BGRADB); off: the separate passes they replace (benchmarks compare both).
    void set_backward_epilogues(bool on) { dgelu_epilogue_ = bias_grad_epilogue_ = on; }
    void set_bias_grad_epilogue(bool on) { bias_grad_epilogue_ = on; }  // BGRADB alone (--bias-grad-epilogue)
    bool dgelu_epilogue() const { return dgelu_epilogue_; }
    bool bias_grad_epilogue() const { return bias_grad_epilogue_; }
    void set_timer(GemmTimer t) { timer_ = std::move(t); }

    // Every choice made so far, one line per plan (the key, the choice, the algorithm's 64 bytes), in key order:
    // deterministic text that load_choices() reads back (docs/cuda.md, "Tuned GEMMs").
    std::string choices() const {
        std::string out;
        for (const auto& kv : plans_)
            if (kv.second.chosen >= 0 && !kv.second.algos.empty()) out += choice_line(kv.first, kv.second) + "\n";
        return out;
    }
    // Choices recorded by choices(); a plan built later reuses its recorded algorithm. Malformed text throws.
    void load_choices(const std::string& text) {
        size_t pos = 0;
        while (pos < text.size()) {
            size_t eol = text.find('\n', pos);
            if (eol == std::string::npos) eol = text.size();
            const std::string line = text.substr(pos, eol - pos);
            pos = eol + 1;
            if (line.empty()) continue;
            Key key;
            cublasLtMatmulAlgo_t algo;
            if (!parse_choice_line(line, key, algo)) fail("GEMM choices: malformed line \"%s\"", line.c_str());
            recorded_[key] = algo;
        }
    }

private:
    struct Key {
        int trans_a, trans_b, d_type, epilogue;
        size_t m, n, k, lda, ldb, ldd;
        unsigned align_a, align_b, align_d, align_bias, align_aux, bias_type;  // no padding bytes anywhere
        bool operator<(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) < 0; }
    };
    struct Plan {
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
        std::vector<cublasLtMatmulAlgo_t> algos;  // the heuristic's list, best first; empty: no algorithm
        std::vector<GemmCandidate> candidates;
        std::vector<float> ms;  // the timer's figure per candidate (empty when not timed)
        int chosen = -1;        // index into algos, -1 until the first run
        bool reused = false;
    };

    // Largest power of two (at most 256) that divides the address: the alignment cuBLASLt may assume.
    static unsigned alignment(const void* p) {
        uintptr_t a = (uintptr_t)p;
        unsigned al = 256;
        while (al > 1 && a % al != 0) al >>= 1;
        return al;
    }
    static cublasLtMatrixLayout_t make_layout(cudaDataType_t type, size_t rows, size_t cols, size_t ld) {
        cublasLtMatrixLayout_t l;
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, (int64_t)ld));
        return l;
    }
    static Key key_of(const GemmArgs& g) {
        Key key;
        std::memset(&key, 0, sizeof key);  // the key is compared bytewise, padding included
        key.trans_a = g.trans_a;
        key.trans_b = g.trans_b;
        key.d_type = (int)g.d_type;
        key.epilogue = (int)g.epilogue;
        key.m = g.m; key.n = g.n; key.k = g.k;
        key.lda = g.lda; key.ldb = g.ldb; key.ldd = g.ldd;
        key.align_a = alignment(g.a);
        key.align_b = alignment(g.b);
        key.align_d = alignment(g.d);
        key.align_bias = g.bias ? alignment(g.bias) : 0;
        key.align_aux = g.aux ? alignment(g.aux) : 0;
        key.bias_type = g.bias ? (unsigned)g.bias_type : 0;
        return key;
    }

    // The descriptor: transposes, epilogue, bias and aux attributes (pointers are set again before every run).
    static cublasLtMatmulDesc_t make_desc(const GemmArgs& g) {
        cublasLtMatmulDesc_t desc;
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue,
                                                    sizeof(g.epilogue)));
        if (g.bias) {
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &g.bias_type,
                                                        sizeof(g.bias_type)));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                        sizeof(g.bias)));
        }
        if (g.aux) {
            int64_t aux_ld = (int64_t)g.ldd;
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                        sizeof(aux_ld)));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux,
                                                        sizeof(g.aux)));
        }
        return desc;
    }

    // Up to kMaxCandidates algorithms for the declared alignments (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*).
    void query_algorithms(const Key& key, Plan& p) {
        cublasLtMatmulPreference_t pref;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        size_t ws = kWorkspaceBytes;
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                          sizeof(ws)));
        const uint32_t al[4] = {key.align_a, key.align_b, key.align_d, key.align_d};
        const cublasLtMatmulPreferenceAttributes_t which[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        for (int i = 0; i < 4; i++)
            CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(uint32_t)));
        cublasLtMatmulHeuristicResult_t results[kMaxCandidates];
        int returned = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.la, p.lb, p.ld, p.ld, pref,
                                                           kMaxCandidates, results, &returned);
        cublasLtMatmulPreferenceDestroy(pref);
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
            destroy(p);
            CUBLAS_CHECK(st);
        }
        for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < returned; i++) {
            if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
            GemmCandidate c;
            c.index = (int)p.algos.size();
            c.waves = results[i].wavesCount;
            int32_t v = 0;
            size_t written = 0;
            if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_ID, &v, sizeof v,
                                                     &written) == CUBLAS_STATUS_SUCCESS)
                c.id = v;
            if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &v,
                                                     sizeof v, &written) == CUBLAS_STATUS_SUCCESS)
                c.split_k = v;
            p.algos.push_back(results[i].algo);
            p.candidates.push_back(c);
        }
    }

    std::map<Key, Plan>::iterator plan(const GemmArgs& g) {
        const Key key = key_of(g);
        auto it = plans_.find(key);
        if (it != plans_.end()) return it;
        Plan p;
        p.desc = make_desc(g);
        // Stored shapes: op(A) is m x k, so A is k x m when transposed; op(B) is k x n.
        p.la = g.trans_a ? make_layout(CUDA_R_16BF, g.k, g.m, g.lda) : make_layout(CUDA_R_16BF, g.m, g.k, g.lda);
        p.lb = g.trans_b ? make_layout(CUDA_R_16BF, g.n, g.k, g.ldb) : make_layout(CUDA_R_16BF, g.k, g.n, g.ldb);
        p.ld = make_layout(g.d_type, g.m, g.n, g.ldd);
        query_algorithms(key, p);
        return plans_.emplace(key, p).first;
    }

    // The status of cublasLtMatmul itself: a candidate it refuses is dropped by the caller (try_run, choose).
    cublasStatus_t launch(Plan& p, const GemmArgs& g, int which, cudaStream_t stream) {
        if (g.bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                                sizeof(g.bias)));
        if (g.aux) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                               &g.aux, sizeof(g.aux)));
        return cublasLtMatmul(handle_, p.desc, &g.alpha, g.a, p.la, g.b, p.lb, &g.beta, g.d, p.ld, g.d, p.ld,
                              &p.algos[(size_t)which], workspace_, kWorkspaceBytes, stream);
    }

    static const char* epilogue_name(cublasLtEpilogue_t e) {
        switch (e) {
            case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
            case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
            case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
            case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
            case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
            case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
            default: return "another";
        }
    }
    // A fused epilogue that cannot run: reported once per key; a plain GEMM (DEFAULT) has no fallback, run() fails.
    bool declined(const GemmArgs& g, const char* why) {
        if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT && declined_.insert({(int)g.epilogue, g.m, g.n, g.k}).second)
            std::fprintf(stderr, "warning: cuBLASLt declined the %s epilogue for a %zux%zux%zu GEMM (%s): using the "
                         "separate pass\n", epilogue_name(g.epilogue), g.m, g.n, g.k, why);
        return false;
    }
    void drop_candidate(Plan& p, const GemmArgs& g, size_t i, cublasStatus_t st) {
        std::fprintf(stderr, "warning: cublasLtMatmul refused the heuristic's candidate %zu (id %d, split-K %d) for a "
                     "%zux%zux%zu GEMM (%s epilogue, status %d): dropped\n", i, p.candidates[i].id,
                     p.candidates[i].split_k, g.m, g.n, g.k, epilogue_name(g.epilogue), (int)st);
        p.algos.erase(p.algos.begin() + (long)i);
        p.candidates.erase(p.candidates.begin() + (long)i);
        if (i < p.ms.size()) p.ms.erase(p.ms.begin() + (long)i);
        rejected_++;
    }
    // The timed fastest candidate (ties: the earlier), or the heuristic's first when nothing was timed.
    static int fastest(const Plan& p) {
        int best = 0;
        for (size_t i = 1; i < p.ms.size() && i < p.algos.size(); i++)
            if (p.ms[i] < p.ms[(size_t)best]) best = (int)i;
        return best;
    }

    // The plan's algorithm: a recorded choice the heuristic still offers; else, with tuning and a choice to make, the
    // fastest candidate on these very buffers. Timing runs the GEMM several times: an accumulating one (beta != 0)
    // has its output copied to a temporary buffer first and restored after, so the step's result is that of one run
    // (the copy exists only while the plan is timed, in the first step: not in the --dry-run plan).
    void choose(const Key& key, Plan& p, const GemmArgs& g, cudaStream_t stream) {
        auto rec = recorded_.find(key);
        for (size_t i = 0; rec != recorded_.end() && i < p.algos.size(); i++)
            if (std::memcmp(&p.algos[i], &rec->second, sizeof(cublasLtMatmulAlgo_t)) == 0) {
                p.chosen = (int)i, p.reused = true, reused_++;
                return;
            }
        p.chosen = 0;
        if (!tuning_ || p.algos.size() < 2) return;
        timing_stream_ = stream;
        const size_t elem = g.d_type == CUDA_R_32F ? 4 : 2, bytes = g.ldd * (g.n - 1) * elem + g.m * elem;
        void* saved = nullptr;  // allocated at the first launch: a timer that launches nothing costs no memory
        std::vector<cublasStatus_t> status(p.algos.size(), CUBLAS_STATUS_SUCCESS);
        for (size_t i = 0; i < p.algos.size(); i++)
            p.ms.push_back(timer_(p.candidates[i], [&, i] {
                if (g.beta != 0.0f && !saved) {
                    CUDA_CHECK(cudaMalloc(&saved, bytes));
                    CUDA_CHECK(cudaMemcpyAsync(saved, g.d, bytes, cudaMemcpyDeviceToDevice, stream));
                }
                const cublasStatus_t st = launch(p, g, (int)i, stream);
                if (st != CUBLAS_STATUS_SUCCESS) status[i] = st;
            }));
        // A refused candidate ran nothing, so its time means nothing: drop it (from the back, indices stay valid).
        for (size_t i = status.size(); i-- > 0;)
            if (status[i] != CUBLAS_STATUS_SUCCESS) drop_candidate(p, g, i, status[i]);
        p.chosen = fastest(p);
        if (saved) {
            CUDA_CHECK(cudaMemcpyAsync(g.d, saved, bytes, cudaMemcpyDeviceToDevice, stream));
            CUDA_CHECK(cudaStreamSynchronize(stream));
            CUDA_CHECK(cudaFree(saved));
        }
        timed_++;
    }

    // The default timer: one warm-up launch, then kTimingReps between two events. The simulator has no clock worth
    // timing: there each candidate's modelled cost (the simulated heuristic's wavesCount) stands in, so a simulated
    // run's choices do not depend on the host's load (tests inject their own timer to exercise the timing path).
    float time_events(const GemmCandidate& c, const std::function<void()>& launch_once) {
        if (kSimulator) return c.waves;  // llmc/cuda/platform.cuh
        if (!events_[0]) {
            CUDA_CHECK(cudaEventCreate(&events_[0]));
            CUDA_CHECK(cudaEventCreate(&events_[1]));
        }
        launch_once();
        CUDA_CHECK(cudaEventRecord(events_[0], timing_stream_));
        for (int r = 0; r < kTimingReps; r++) launch_once();
        CUDA_CHECK(cudaEventRecord(events_[1], timing_stream_));
        CUDA_CHECK(cudaEventSynchronize(events_[1]));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[1]));
        return ms / kTimingReps;
    }

    // "gemm <16 key numbers> : <index> <count> <id> <split-K> <ms or -1> : <8 hex words>"
    static std::string choice_line(const Key& k, const Plan& p) {
        const cublasLtMatmulAlgo_t& a = p.algos[(size_t)p.chosen];
        const GemmCandidate& c = p.candidates[(size_t)p.chosen];
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "gemm %d %d %d %d %zu %zu %zu %zu %zu %zu %u %u %u %u %u %u : %d %zu %d %d %.4f : "
                      "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64
                      " %016" PRIx64 " %016" PRIx64,
                      k.trans_a, k.trans_b, k.d_type, k.epilogue, k.m, k.n, k.k, k.lda, k.ldb, k.ldd, k.align_a,
                      k.align_b, k.align_d, k.align_bias, k.align_aux, k.bias_type, p.chosen, p.algos.size(), c.id,
                      c.split_k, p.ms.empty() ? -1.0 : (double)p.ms[(size_t)p.chosen], a.data[0], a.data[1],
                      a.data[2], a.data[3], a.data[4], a.data[5], a.data[6], a.data[7]);
        return buf;
    }
    static bool parse_choice_line(const std::string& line, Key& k, cublasLtMatmulAlgo_t& a) {
        std::memset(&k, 0, sizeof k);
        int chosen = 0, id = 0, split = 0, used = 0;
        size_t count = 0;
        double ms = 0;
        const int n = std::sscanf(line.c_str(),
                                  "gemm %d %d %d %d %zu %zu %zu %zu %zu %zu %u %u %u %u %u %u : %d %zu %d %d %lf : "
                                  "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64
                                  " %" SCNx64 "%n",
                                  &k.trans_a, &k.trans_b, &k.d_type, &k.epilogue, &k.m, &k.n, &k.k, &k.lda, &k.ldb,
                                  &k.ldd, &k.align_a, &k.align_b, &k.align_d, &k.align_bias, &k.align_aux,
                                  &k.bias_type, &chosen, &count, &id, &split, &ms, &a.data[0], &a.data[1], &a.data[2],
                                  &a.data[3], &a.data[4], &a.data[5], &a.data[6], &a.data[7], &used);
        return n == 29 && (size_t)used == line.size();
    }

    static void destroy(Plan& p) {
        if (p.la) cublasLtMatrixLayoutDestroy(p.la);
        if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
        if (p.ld) cublasLtMatrixLayoutDestroy(p.ld);
        if (p.desc) cublasLtMatmulDescDestroy(p.desc);
        p = Plan();
    }


    bool tuning_;
    bool dgelu_epilogue_ = true, bias_grad_epilogue_ = true;
    GemmTimer timer_;
    cudaEvent_t events_[2] = {nullptr, nullptr};
    cudaStream_t timing_stream_ = nullptr;
    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    std::map<Key, Plan> plans_;
    std::map<Key, cublasLtMatmulAlgo_t> recorded_;
    std::set<std::tuple<int, size_t, size_t, size_t>> declined_;  // epilogue, m, n, k
    size_t timed_ = 0, reused_ = 0, rejected_ = 0;
};

// ---- kernels around the matmuls ----------------------------------------------------------------------------------

// Fallback bias (when cuBLASLt declines the BIAS epilogue): out += bias per column (a second bf16 rounding). A thread
// handles W consecutive columns of a row (W = 8 on the vector path: OC a multiple of 8, aligned pointers).
template <int W>
__global__ void add_bias_kernel(bf16* out, const bf16* __restrict__ bias, size_t N, size_t OC) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (i >= N * OC) return;
    float o[W], b[W];
    load_floats(o, out + i);
    load_floats(b, bias + i % OC);
LLMC_UNROLL
    for (int e = 0; e < W; e++) o[e] += b[e];
    store_floats(out + i, o);
}

inline bool add_bias(bf16* out, const bf16* bias, size_t N, size_t OC, cudaStream_t stream) {
    return launch_elementwise(vector_ok(OC, kPackBf16, out, bias), add_bias_kernel<kPackBf16>, add_bias_kernel<1>,
                              kPackBf16, N * OC, stream, out, bias, N, OC);
}

// Column sums of dout (N, OC), first stage: block (g, chunk) sums rows [g R, (g + 1) R) of its columns in row order
// and writes partials[g*OC + col]. A thread owns W consecutive columns (W = 8: one 16-byte load per row, a warp
// reads 512 contiguous bytes) and keeps kReduceUnroll rows' loads in flight. The second stage is column_sums_into
// (reduce.cuh). The row blocks are a function of N only, so the order is reproducible.
constexpr size_t kBiasBackwardMaxRowBlocks = 1024;
constexpr size_t kBiasBackwardMinRows = 16;
constexpr int kBiasBackwardMaxBlock = 256;  // the host picks the block size from OC, at most this (resource check)
template <int W>
__global__ void __launch_bounds__(kBiasBackwardMaxBlock) bias_backward_partials_kernel(float* __restrict__ partials, const bf16* __restrict__ dout, size_t N,
                                              size_t OC, size_t rows_per_block) {
    const size_t packs = OC / W, col_chunks = (packs + blockDim.x - 1) / blockDim.x;
    const size_t g = blockIdx.x / col_chunks;
    const size_t j = (blockIdx.x % col_chunks) * blockDim.x + threadIdx.x;
    if (j >= packs) return;
    const size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block < N ? r0 + rows_per_block : N;
    const bf16* col = dout + j * W;
    float acc[W] = {};
    sum_rows(acc, r1 - r0, [&](size_t r) { return col + (r0 + r) * OC; });
    store_floats(partials + g * OC + j * W, acc);
}

inline size_t bias_backward_rows_per_block(size_t N) {
    const size_t rows = ceil_div(N, kBiasBackwardMaxRowBlocks);
    return rows < kBiasBackwardMinRows ? kBiasBackwardMinRows : rows;
}
inline size_t bias_backward_row_blocks(size_t N) { return ceil_div(N, bias_backward_rows_per_block(N)); }

inline bool bias_backward(float* dbias, float* partials, const bf16* dout, size_t N, size_t OC, cudaStream_t stream) {
    if (N == 0) return true;
    const size_t rows_per_block = bias_backward_rows_per_block(N), G = bias_backward_row_blocks(N);
    const bool vec = vector_ok(OC, kPackBf16, dout, partials);
    const size_t packs = vec ? OC / kPackBf16 : OC;
    const size_t block = packs >= kBiasBackwardMaxBlock ? kBiasBackwardMaxBlock : 32 * ceil_div(packs, 32);
    auto kernel = vec ? bias_backward_partials_kernel<kPackBf16> : bias_backward_partials_kernel<1>;
    LLMC_LAUNCH(kernel, grid_size(G * ceil_div(packs, block), 1), block, 0, stream, partials, dout, N, OC,
                rows_per_block);
    const bool vec_sums = column_sums_into(dbias, partials, G, OC, stream);
    return vec && vec_sums;
}

// ---- the two linear-layer ops ------------------------------------------------------------------------------------

// The linear-layer ops return true when every memory-bound kernel they launched (fallback bias, GELU, bias
// gradient) took its vector path.

// out (N,OC) = inp @ w^T + bias via the BIAS epilogue (or a plain GEMM and add_bias_kernel if it is declined).
inline bool linear_forward(GemmRunner& gemm, bf16* out, const bf16* inp, const bf16* w, const bf16* bias, size_t N,
                           size_t C, size_t OC, cudaStream_t stream) {
    // out^T (OC x N, ld OC) = w (stored C x OC, ld C, transposed) @ inp^T (C x N, ld C)
    GemmArgs g;
    g.d = out; g.a = w; g.b = inp;
    g.trans_a = true; g.trans_b = false;
    g.m = OC; g.n = N; g.k = C;
    g.lda = C; g.ldb = C; g.ldd = OC;
    if (bias) {
        g.bias = bias;
        g.epilogue = CUBLASLT_EPILOGUE_BIAS;
        if (gemm.try_run(g, stream)) return true;
        g.bias = nullptr;
        g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    }
    gemm.run(g, stream);
    return bias ? add_bias(out, bias, N, OC, stream) : true;
}

inline bool matmul_forward(GemmRunner& gemm, bf16* out, const bf16* inp, const bf16* w, const bf16* bias, size_t N,
                           size_t C, size_t OC, bf16* pre_gelu, cudaStream_t stream) {
    if (!pre_gelu) return linear_forward(gemm, out, inp, w, bias, N, C, OC, stream);
    // Fused: GELU_AUX(_BIAS) writes pre_gelu = inp @ w^T + bias (bf16, aux output) and out = gelu of it. cuBLASLt
    // requires the aux leading dimension (OC) to be a multiple of 8.
    if (OC % 8 == 0) {
        GemmArgs g;
        g.d = out; g.a = w; g.b = inp;
        g.trans_a = true; g.trans_b = false;
        g.m = OC; g.n = N; g.k = C;
        g.lda = C; g.ldb = C; g.ldd = OC;
        g.bias = bias;
        g.aux = pre_gelu;
        g.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        if (gemm.try_run(g, stream)) return true;
    }
    // Otherwise: pre_gelu from the GEMM, then out = gelu(pre_gelu) (GELU of the stored bf16 pre-activation).
    const bool vec_bias = linear_forward(gemm, pre_gelu, inp, w, bias, N, C, OC, stream);
    return gelu_forward(out, pre_gelu, N * OC, stream) && vec_bias;
}

// dinp^T (C x N, ld C) = w (stored C x OC, ld C) @ dout^T (OC x N, ld OC). With dinp_pre_gelu: the DGELU epilogue
// multiplies by gelu'(dinp_pre_gelu) (aux, ld C) before the one rounding to bf16; cuBLASLt needs the aux leading
// dimension C to be a multiple of 8. Otherwise (or if declined): the plain GEMM, then the in-place GELU backward.
inline bool backward_dinp(GemmRunner& gemm, bf16* dinp, const bf16* dout, const bf16* w, size_t N, size_t C,
                          size_t OC, const bf16* dinp_pre_gelu, cudaStream_t stream) {
    GemmArgs gi;
    gi.d = dinp; gi.a = w; gi.b = dout;
    gi.m = C; gi.n = N; gi.k = OC;
    gi.lda = C; gi.ldb = OC; gi.ldd = C;
    if (dinp_pre_gelu && C % 8 == 0 && gemm.dgelu_epilogue()) {
        gi.aux = const_cast<bf16*>(dinp_pre_gelu);  // read, not written, by DGELU
        gi.epilogue = CUBLASLT_EPILOGUE_DGELU;
        if (gemm.try_run(gi, stream)) return true;
        gi.aux = nullptr;
        gi.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    }
    gemm.run(gi, stream);
    return dinp_pre_gelu ? gelu_backward_inplace(dinp, dinp_pre_gelu, N * C, stream) : true;
}

// dweight^T (C x OC, ld C) += inp^T (C x N, ld C) @ dout (stored OC x N, ld OC, transposed), fp32 C = D. With dbias:
// the BGRADB epilogue sums op(B) = dout over k = N into bias_out (OC fp32, cuBLASLt overwrites it), which is then added
// into dbias; if declined, the plain GEMM and the two-stage column sum (bias_backward).
inline bool backward_dweight(GemmRunner& gemm, float* dweight, float* dbias, float* bias_scratch, const bf16* dout,
                             const bf16* inp, size_t N, size_t C, size_t OC, cudaStream_t stream) {
    GemmArgs gw;
    gw.d = dweight; gw.a = inp; gw.b = dout;
    gw.trans_b = true;
    gw.m = C; gw.n = OC; gw.k = N;
    gw.lda = C; gw.ldb = OC; gw.ldd = C;
    gw.beta = 1.0f;
    gw.d_type = CUDA_R_32F;
    if (dbias && gemm.bias_grad_epilogue()) {
        gw.bias = bias_scratch;
        gw.bias_type = CUDA_R_32F;
        gw.epilogue = CUBLASLT_EPILOGUE_BGRADB;
        if (gemm.try_run(gw, stream)) return add_into(dbias, bias_scratch, OC, stream);
        gw.bias = nullptr;
        gw.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    }
    gemm.run(gw, stream);
    return dbias ? bias_backward(dbias, bias_scratch, dout, N, OC, stream) : true;
}

// pre_gelu: dout is the gradient with respect to gelu(pre_gelu) and is first turned, in place, into the gradient with
// respect to pre_gelu (a separate pass). dinp_pre_gelu: the layer's input is gelu(dinp_pre_gelu), and dinp is written
// as the gradient with respect to dinp_pre_gelu (fused into the dinp GEMM, DGELU).
inline bool matmul_backward(GemmRunner& gemm, bf16* dinp, float* dweight, float* dbias, float* bias_scratch,
                            bf16* dout, const bf16* inp, const bf16* w, size_t N, size_t C, size_t OC,
                            const bf16* pre_gelu, const bf16* dinp_pre_gelu, cudaStream_t stream) {
    bool vec = true;
    if (pre_gelu) vec = gelu_backward_inplace(dout, pre_gelu, N * OC, stream) && vec;
    vec = backward_dinp(gemm, dinp, dout, w, N, C, OC, dinp_pre_gelu, stream) && vec;
    return backward_dweight(gemm, dweight, dbias, bias_scratch, dout, inp, N, C, OC, stream) && vec;
}

// Scratch floats bias_backward needs.
inline size_t bias_backward_scratch_floats(size_t N, size_t OC) { return bias_backward_row_blocks(N) * OC; }

}  // namespace llmc
