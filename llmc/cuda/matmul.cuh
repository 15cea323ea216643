// Matmuls through cuBLASLt, and the small kernels around them.
//
// Row-major model convention (weights (OC, C) as in the model file):
//   forward:  out (N,OC) = inp (N,C) @ w^T + bias        [+ GELU: pre_gelu = that, out = gelu(pre_gelu)]
//   backward: dout *= gelu'(pre_gelu)  (in place, first, only when the forward had a GELU)
//             dinp (N,C)     = dout @ w                    written (=), bf16
//             dweight (OC,C) += dout^T @ inp               fp32, straight into the gradient (beta = 1)
//             dbias (OC)     += column sums of dout        fp32 (a deterministic two-stage kernel; cuBLASLt's BGRADB
//                                                          epilogue would overwrite instead of accumulating)
// cuBLASLt is column-major: a row-major (R, K) matrix is a column-major K x R matrix with ld = K, so each row-major
// product is computed as its transpose, D^T = op(A) op(B). The mapping of each call is written next to it.
// All GEMMs accumulate in fp32 (CUBLAS_COMPUTE_32F) and scale in fp32.
//
// GemmRunner caches one plan (descriptor, four layouts, algorithm) per distinct call shape, so a training step builds
// nothing after the first one. The pointer alignments are part of the key: cuBLASLt's heuristic chooses kernels for a
// declared minimum alignment (and the bias / aux pointers set before the query), so a plan is only reused for
// pointers at least as aligned.
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "common.cuh"
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
    const void* bias = nullptr;  // bf16 (m), for the *_BIAS epilogues
    void* aux = nullptr;         // bf16 (m x n, ld = ldd), the pre-GELU output of the *_AUX epilogues
};

class GemmRunner {
public:
    static constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt recommends for Hopper

    GemmRunner() {
        CUBLAS_CHECK(cublasLtCreate(&handle_));
        CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
    }
    ~GemmRunner() {
        for (auto& kv : plans_) destroy(kv.second);
        if (workspace_) cudaFree(workspace_);
        if (handle_) cublasLtDestroy(handle_);
    }
    GemmRunner(const GemmRunner&) = delete;
    GemmRunner& operator=(const GemmRunner&) = delete;

    // Runs the GEMM; returns false (and runs nothing) when cuBLASLt has no algorithm for this configuration, or when
    // a fused epilogue's bias or aux pointer is not 16-byte aligned, so that the caller can fall back to a plainer
    // epilogue. cuBLASLt's alignment preferences do not cover those two pointers: the heuristic may pick a kernel
    // that assumes 16 bytes and then fault on the device (pytorch#194497), so the check is ours.
    bool try_run(const GemmArgs& g, cudaStream_t stream) {
        if ((g.bias && (uintptr_t)g.bias % 16 != 0) || (g.aux && (uintptr_t)g.aux % 16 != 0)) return false;
        Plan& p = plan(g);
        if (!p.found) return false;
        if (g.bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                                sizeof(g.bias)));
        if (g.aux) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                               &g.aux, sizeof(g.aux)));
        CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &g.alpha, g.a, p.la, g.b, p.lb, &g.beta, g.d, p.ld, g.d, p.ld,
                                    &p.algo, workspace_, kWorkspaceBytes, stream));
        return true;
    }
    void run(const GemmArgs& g, cudaStream_t stream) {
        if (!try_run(g, stream))
            fail("cuBLASLt has no algorithm for a %zux%zux%zu GEMM (trans %d%d, epilogue %d)", g.m, g.n, g.k,
                 (int)g.trans_a, (int)g.trans_b, (int)g.epilogue);
    }
    size_t num_plans() const { return plans_.size(); }

private:
    struct Key {
        int trans_a, trans_b, d_type, epilogue;
        size_t m, n, k, lda, ldb, ldd;
        unsigned align_a, align_b, align_d, align_bias, align_aux, unused;  // `unused` leaves no padding bytes
        bool operator<(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) < 0; }
    };
    struct Plan {
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
        cublasLtMatmulAlgo_t algo;
        bool found = false;
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

    Plan& plan(const GemmArgs& g) {
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
        auto it = plans_.find(key);
        if (it != plans_.end()) return it->second;

        Plan p;
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue,
                                                    sizeof(g.epilogue)));
        if (g.bias) {
            cudaDataType_t bias_type = CUDA_R_16BF;
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                        sizeof(bias_type)));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                        sizeof(g.bias)));
        }
        if (g.aux) {
            int64_t aux_ld = (int64_t)g.ldd;
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                        sizeof(aux_ld)));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux,
                                                        sizeof(g.aux)));
        }
        // Stored shapes: op(A) is m x k, so A is k x m when transposed; op(B) is k x n.
        p.la = g.trans_a ? make_layout(CUDA_R_16BF, g.k, g.m, g.lda) : make_layout(CUDA_R_16BF, g.m, g.k, g.lda);
        p.lb = g.trans_b ? make_layout(CUDA_R_16BF, g.n, g.k, g.ldb) : make_layout(CUDA_R_16BF, g.k, g.n, g.ldb);
        p.ld = make_layout(g.d_type, g.m, g.n, g.ldd);

        cublasLtMatmulPreference_t pref;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        size_t ws = kWorkspaceBytes;
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                          sizeof(ws)));
        uint32_t al[3] = {key.align_a, key.align_b, key.align_d};
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0],
                                                          sizeof(uint32_t)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1],
                                                          sizeof(uint32_t)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2],
                                                          sizeof(uint32_t)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2],
                                                          sizeof(uint32_t)));
        cublasLtMatmulHeuristicResult_t result;
        int returned = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.la, p.lb, p.ld, p.ld, pref, 1, &result,
                                                           &returned);
        cublasLtMatmulPreferenceDestroy(pref);
        if (st == CUBLAS_STATUS_SUCCESS && returned > 0) {
            p.algo = result.algo;
            p.found = true;
        } else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
            destroy(p);
            CUBLAS_CHECK(st);
        }
        return plans_.emplace(key, p).first->second;
    }

    static void destroy(Plan& p) {
        if (p.la) cublasLtMatrixLayoutDestroy(p.la);
        if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
        if (p.ld) cublasLtMatrixLayoutDestroy(p.ld);
        if (p.desc) cublasLtMatmulDescDestroy(p.desc);
        p = Plan();
    }

    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    std::map<Key, Plan> plans_;
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

inline bool matmul_backward(GemmRunner& gemm, bf16* dinp, float* dweight, float* dbias, float* bias_partials,
                            bf16* dout, const bf16* inp, const bf16* w, size_t N, size_t C, size_t OC,
                            const bf16* pre_gelu, cudaStream_t stream) {
    bool vec = true;
    if (pre_gelu) vec = gelu_backward_inplace(dout, pre_gelu, N * OC, stream) && vec;
    if (dbias) vec = bias_backward(dbias, bias_partials, dout, N, OC, stream) && vec;
    // dinp^T (C x N, ld C) = w (stored C x OC, ld C) @ dout^T (OC x N, ld OC)
    GemmArgs gi;
    gi.d = dinp; gi.a = w; gi.b = dout;
    gi.m = C; gi.n = N; gi.k = OC;
    gi.lda = C; gi.ldb = OC; gi.ldd = C;
    gemm.run(gi, stream);
    // dweight^T (C x OC, ld C) += inp^T (C x N, ld C) @ dout (stored OC x N, ld OC, transposed), fp32 C = D
    GemmArgs gw;
    gw.d = dweight; gw.a = inp; gw.b = dout;
    gw.trans_b = true;
    gw.m = C; gw.n = OC; gw.k = N;
    gw.lda = C; gw.ldb = OC; gw.ldd = C;
    gw.beta = 1.0f;
    gw.d_type = CUDA_R_32F;
    gemm.run(gw, stream);
    return vec;
}

// Scratch floats bias_backward needs.
inline size_t bias_backward_scratch_floats(size_t N, size_t OC) { return bias_backward_row_blocks(N) * OC; }

}  // namespace llmc
