// cuBLASLt on the CPU: cublasLtMatmul computes D = epilogue(alpha * op(A) op(B) + beta * C [+ bias]) with the real
// library's conventions (column-major storage, op() from TRANSA/TRANSB, leading dimensions, strided batches), for the
// subset the llmc CUDA backend uses (docs/cudasim.md, "cuBLASLt"): fp32 or bf16 A/B, fp32 or bf16 C/D,
// CUBLAS_COMPUTE_32F with fp32 scale, epilogues DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU,
// DGELU_BGRAD, BGRADA, BGRADB. The heuristic returns several algorithms, as the real one does: the first accumulates
// each product in double and rounds once to the output type; the others split k into 2, 4, 8 or 16 parts, each
// accumulated in fp32 and added in fp32 in part order (split-K), so that choosing among them changes the bits of the
// result, as it does on a GPU. Each result's wavesCount is a modelled cost (the first is the cheapest unless
// CUDASIM_CUBLASLT_FASTEST_SPLITK=s makes the s-way split the cheapest), for callers that rank algorithms without a
// clock worth timing (the simulator's). The GEMM is an operation on the caller's
// stream (it runs when the stream scheduler gets to it, like a kernel). Anything else returns
// CUBLAS_STATUS_NOT_SUPPORTED (or INVALID_VALUE where the real library does) with a line on stderr.
//
// The library refuses what the real one refuses (docs/cudasim.md lists each rule and its source): the heuristic
// returns an algorithm for the alignment the preferences declare (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default
// 256), and cublasLtMatmul fails with CUBLAS_STATUS_NOT_SUPPORTED when a matrix (or a strided batch's entry) is less
// aligned than that algorithm needs; the fused epilogues assume a 16-byte aligned bias and aux buffer (a misaligned
// one is a device fault, as on a GPU); the GELU aux leading dimension and batch stride must be multiples of 8.
//
// Two switches make it decline what a real library (another version, another GPU) may decline, so that the callers'
// fallbacks run in tests: CUDASIM_CUBLASLT_DECLINE=BIAS,GELU_AUX,GELU_AUX_BIAS,DGELU,BGRADB (any of them, or "all"
// for every fused epilogue) makes the heuristic offer no algorithm for those epilogues; CUDASIM_CUBLASLT_REFUSE_SPLITK=s
// makes cublasLtMatmul refuse (CUBLAS_STATUS_NOT_SUPPORTED) the s-way split-K algorithm the heuristic did offer
// (s = 1: the first, unsplit one).
#include <cublasLt.h>

#include "dev/cudasim/state.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch = 1;
    int64_t stride = 0;
    int32_t order = CUBLASLT_ORDER_COL;
};

struct Desc {
    int32_t compute;
    int32_t scale;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    void* bias = nullptr;
    int32_t bias_type = -1;
    int64_t bias_batch_stride = 0;
    void* aux = nullptr;
    int64_t aux_ld = 0, aux_batch_stride = 0;
    int32_t aux_type = -1;
};

struct Preference {
    uint64_t max_workspace = 0;
    uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D: the alignment the caller guarantees
};
struct Handle { int unused = 0; };

Layout* L(cublasLtMatrixLayout_t p) { return reinterpret_cast<Layout*>(p); }
Desc* D(cublasLtMatmulDesc_t p) { return reinterpret_cast<Desc*>(p); }

cublasStatus_t complain(cublasStatus_t s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
cublasStatus_t complain(cublasStatus_t s, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cudasim::detail::report("cudasim cuBLASLt: ", fmt, ap);
    va_end(ap);
    return s;
}

// Copies an attribute value, checking its size as the real library does.
template <class T>
cublasStatus_t set(T& field, const void* buf, size_t size, const char* what) {
    if (!buf || size != sizeof(T))
        return complain(CUBLAS_STATUS_INVALID_VALUE, "%s: attribute value of %zu bytes, expected %zu", what, size, sizeof(T));
    std::memcpy(&field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

bool supported_type(int t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

float load(const void* base, int type, size_t i) {
    if (type == CUDA_R_32F) return static_cast<const float*>(base)[i];
    return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}
void store(void* base, int type, size_t i, double v) {
    if (type == CUDA_R_32F) static_cast<float*>(base)[i] = (float)v;
    else static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn((float)v);
}

double gelu_tanh(double x) {
    const double s = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

// The problem cublasLtMatmul solves, after validating the descriptors.
struct Problem {
    uint64_t m, n, k;
    int batch;
    bool bias_in, gelu, aux, dgelu, dgelu_bgrad, bgrada, bgradb;
    int bias_type, aux_type;
};

cublasStatus_t validate(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dd, Problem& p) {
    if (d.compute != CUBLAS_COMPUTE_32F)
        return complain(CUBLAS_STATUS_NOT_SUPPORTED, "compute type %d not simulated (use CUBLAS_COMPUTE_32F)", d.compute);
    if (d.scale != CUDA_R_32F) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "scale type %d not simulated (use CUDA_R_32F)", d.scale);
    for (const Layout* l : {&a, &b, &c, &dd}) {
        if (!supported_type(l->type)) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "matrix type %d not simulated", (int)l->type);
        if (l->order != CUBLASLT_ORDER_COL) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "only column-major layouts are simulated");
        if (l->ld < (int64_t)l->rows || l->ld < 1)
            return complain(CUBLAS_STATUS_INVALID_VALUE, "leading dimension %lld < rows %llu", (long long)l->ld,
                            (unsigned long long)l->rows);
    }
    if (a.type != b.type) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "A and B types differ");
    if (c.type != dd.type) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "C and D types differ");
    if (a.type == CUDA_R_32F && dd.type != CUDA_R_32F)
        return complain(CUBLAS_STATUS_NOT_SUPPORTED, "fp32 A/B with bf16 C/D is not a cuBLASLt combination");
    if (d.transa != CUBLAS_OP_N && d.transa != CUBLAS_OP_T) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "transa %d", d.transa);
    if (d.transb != CUBLAS_OP_N && d.transb != CUBLAS_OP_T) return complain(CUBLAS_STATUS_NOT_SUPPORTED, "transb %d", d.transb);
    const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
    p.m = ta ? a.cols : a.rows;
    p.k = ta ? a.rows : a.cols;
    p.n = tb ? b.rows : b.cols;
    const uint64_t kb = tb ? b.cols : b.rows;
    if (kb != p.k || dd.rows != p.m || dd.cols != p.n || c.rows != p.m || c.cols != p.n)
        return complain(CUBLAS_STATUS_INVALID_VALUE,
                        "shapes do not agree: op(A) is %llux%llu, op(B) %llux%llu, C %llux%llu, D %llux%llu",
                        (unsigned long long)p.m, (unsigned long long)p.k, (unsigned long long)kb,
                        (unsigned long long)p.n, (unsigned long long)c.rows, (unsigned long long)c.cols,
                        (unsigned long long)dd.rows, (unsigned long long)dd.cols);
    p.batch = dd.batch;
    for (const Layout* l : {&a, &b, &c})
        if (l->batch != dd.batch)
            return complain(CUBLAS_STATUS_INVALID_VALUE, "batch counts differ (%d vs D's %d)", l->batch, dd.batch);
    const uint32_t e = d.epilogue;
    switch (e) {
        case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_GELU:
        case CUBLASLT_EPILOGUE_GELU_BIAS: case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        case CUBLASLT_EPILOGUE_DGELU: case CUBLASLT_EPILOGUE_DGELU_BGRAD:
        case CUBLASLT_EPILOGUE_BGRADA: case CUBLASLT_EPILOGUE_BGRADB: break;
        default: return complain(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u not simulated", e);
    }
    p.dgelu = e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    p.dgelu_bgrad = e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    p.bias_in = (e & CUBLASLT_EPILOGUE_BIAS) && !p.dgelu && !(e & (CUBLASLT_EPILOGUE_BGRADA | CUBLASLT_EPILOGUE_BGRADB));
    p.gelu = e & CUBLASLT_EPILOGUE_GELU;
    p.aux = (p.gelu && (e & 128)) || p.dgelu;  // GELU_AUX writes the aux matrix, DGELU reads it
    p.bgrada = e == CUBLASLT_EPILOGUE_BGRADA;
    p.bgradb = e == CUBLASLT_EPILOGUE_BGRADB;
    // Bias (and bias gradient) elements default to the output type; the aux matrix too.
    p.bias_type = d.bias_type == -1 ? (int)dd.type : d.bias_type;
    p.aux_type = d.aux_type == -1 ? (int)dd.type : d.aux_type;
    const bool bias_out = p.bgrada || p.bgradb || p.dgelu_bgrad;
    if ((p.bias_in || bias_out) && (!d.bias || !supported_type(p.bias_type)))
        return complain(CUBLAS_STATUS_INVALID_VALUE, "epilogue %u needs CUBLASLT_MATMUL_DESC_BIAS_POINTER (fp32/bf16)", e);
    if (p.aux) {
        if (!d.aux || !supported_type(p.aux_type))
            return complain(CUBLAS_STATUS_INVALID_VALUE, "epilogue %u needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", e);
        if (p.aux_type != (int)dd.type)
            return complain(CUBLAS_STATUS_NOT_SUPPORTED, "the GELU aux matrix must have the output's type (Dtype)");
        if (d.aux_ld < (int64_t)p.m || d.aux_ld % 8 != 0)
            return complain(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD %lld must be >= rows (%llu) and divisible by 8",
                            (long long)d.aux_ld, (unsigned long long)p.m);
        if (p.batch > 1 && d.aux_batch_stride % 8 != 0)
            return complain(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_BATCH_STRIDE %lld must be divisible by 8",
                            (long long)d.aux_batch_stride);
    }
    if (bias_out && p.bias_type != (int)c.type)
        return complain(CUBLAS_STATUS_NOT_SUPPORTED, "bias gradient elements must have the output's type (Ctype)");
    // Seen on a GPU (cuBLASLt 13.0, H200: docs/cudasim.md): no algorithm for BGRADB unless op(B) is transposed.
    if (p.bgradb && d.transb != CUBLAS_OP_T)
        return complain(CUBLAS_STATUS_NOT_SUPPORTED, "BGRADB needs op(B) transposed (CUBLASLT_MATMUL_DESC_TRANSB)");
    return CUBLAS_STATUS_SUCCESS;
}

// ---- algorithms and alignment --------------------------------------------------------------------------------
// The simulated library has kernels for every alignment from the element size up to 16 bytes (vector loads). The
// heuristic picks, for each matrix, the most aligned kernel that the declared alignment (preference, default 256)
// and the leading dimension (each column starts ld elements after the previous one) allow. cublasLtMatmul then needs
// every matrix pointer, and every entry of a strided batch, aligned that much: a caller that declares more than its
// pointers have gets CUBLAS_STATUS_NOT_SUPPORTED (as PyTorch found on sm80/sm90, pytorch#92201, #97205).
constexpr uint64_t kAlgoMarker = 0xC0DA5111ull;
constexpr unsigned kVectorBytes = 16;

struct Algo {
    unsigned align[4];  // A, B, C, D: bytes each matrix must be aligned to
    unsigned splits = 1;  // 1: one double accumulation; s > 1: k in s parts, fp32 partial sums added in fp32
};
constexpr unsigned kSplitChoices[] = {2, 4, 8, 16};

size_t elem_bytes(int type) { return type == CUDA_R_32F ? 4 : 2; }
// Largest power of two dividing v, capped at 256 (0 counts as fully aligned).
unsigned pow2_alignment(uint64_t v) {
    unsigned al = 256;
    while (al > 1 && v % al != 0) al >>= 1;
    return al;
}

cublasStatus_t choose_algorithm(const Preference& pref, const Layout& a, const Layout& b, const Layout& c,
                                const Layout& d, Algo& algo) {
    const Layout* ls[4] = {&a, &b, &c, &d};
    const char* names = "ABCD";
    for (int i = 0; i < 4; i++) {
        const unsigned declared = pref.min_alignment[i], elem = (unsigned)elem_bytes(ls[i]->type);
        if (declared < elem || (declared & (declared - 1)) != 0)
            return complain(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic: no algorithm for matrix %c declared %u-byte "
                            "aligned (elements are %u bytes; alignments are powers of two)", names[i], declared, elem);
        unsigned r = std::min(declared, kVectorBytes);
        if (ls[i]->cols > 1) r = std::min(r, pow2_alignment((uint64_t)ls[i]->ld * elem));
        algo.align[i] = std::max(r, elem);
    }
    return CUBLAS_STATUS_SUCCESS;
}

void store_algo(const Algo& algo, cublasLtMatmulAlgo_t& out) {
    std::memset(&out, 0, sizeof out);
    out.data[0] = kAlgoMarker;
    for (int i = 0; i < 4; i++) out.data[1 + i] = algo.align[i];
    out.data[5] = algo.splits;
}
bool load_algo(const cublasLtMatmulAlgo_t& in, Algo& algo) {
    if (in.data[0] != kAlgoMarker) return false;
    for (int i = 0; i < 4; i++) algo.align[i] = (unsigned)in.data[1 + i];
    algo.splits = (unsigned)in.data[5];
    return algo.splits >= 1;
}

cublasStatus_t check_alignment(const Algo& algo, const Layout& l, const void* ptr, const char* name) {
    const int i = name[0] - 'A';
    const unsigned need = algo.align[i];
    for (int bi = 0; bi < l.batch; bi++) {
        const uintptr_t p = (uintptr_t)ptr + (uintptr_t)(bi * l.stride) * elem_bytes(l.type);
        if (p % need != 0)
            return complain(CUBLAS_STATUS_NOT_SUPPORTED,
                            "cublasLtMatmul: matrix %s%s at %p is not %u-byte aligned, which the algorithm the "
                            "heuristic chose for the declared CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%s_BYTES needs",
                            name, bi ? " (an entry of the strided batch)" : "", (void*)p, need, name);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The fused epilogue kernels read the bias and write the aux matrix with 16-byte vector accesses; cuBLASLt's
// alignment preferences do not cover these pointers, so a misaligned one is not refused but faults on the device
// ("misaligned address", pytorch#194497): the caller must check. Reported as the device fault it is.
void check_epilogue_pointers(const Desc& d, const Problem& p) {
    for (int bi = 0; bi < p.batch; bi++) {
        const uintptr_t bias = (uintptr_t)d.bias + (uintptr_t)(bi * d.bias_batch_stride) * elem_bytes(p.bias_type);
        const uintptr_t aux = (uintptr_t)d.aux + (uintptr_t)(bi * d.aux_batch_stride) * elem_bytes(p.aux_type);
        if ((p.bias_in || p.bgrada || p.bgradb || p.dgelu_bgrad) && bias % kVectorBytes != 0)
            cudasim::detail::fatal("cublasLtMatmul epilogue %u: misaligned address: the bias vector%s at %p is not "
                                   "16-byte aligned (cudaErrorMisalignedAddress on a GPU: the fused epilogue assumes "
                                   "it, and the heuristic does not refuse it)",
                                   d.epilogue, bi ? " of a batch entry" : "", (void*)bias);
        if (p.aux && aux % kVectorBytes != 0)
            cudasim::detail::fatal("cublasLtMatmul epilogue %u: misaligned address: the aux matrix%s at %p is not "
                                   "16-byte aligned (cudaErrorMisalignedAddress on a GPU)",
                                   d.epilogue, bi ? " of a batch entry" : "", (void*)aux);
    }
}

// One dot product over k: in double (one algorithm), or split into `splits` consecutive parts of ceil(k / splits),
// each summed in fp32 (fma-free, in index order) and the parts added in fp32 in part order (the split-K algorithms).
double dot(const float* x, const float* y, size_t k, unsigned splits) {
    if (splits <= 1) {
        double acc = 0;
        for (size_t kk = 0; kk < k; kk++) acc += (double)x[kk] * y[kk];
        return acc;
    }
    const size_t part = (k + splits - 1) / splits;
    float total = 0.0f;
    for (size_t p0 = 0; p0 < k; p0 += part) {
        float s = 0.0f;
        for (size_t kk = p0; kk < std::min(k, p0 + part); kk++) {
            const float prod = x[kk] * y[kk];  // exact for bf16 inputs (8 + 8 significant bits)
            s += prod;
        }
        total += s;
    }
    return total;
}

double gelu_tanh_grad(double x) {
    const double s = std::sqrt(2.0 / M_PI), u = s * (x + 0.044715 * x * x * x), t = std::tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

void gemm(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dd, const Problem& p,
          const Algo& algo, float alpha, float beta, const void* A, const void* B, const void* C, void* Dm) {
    const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
    const size_t m = p.m, n = p.n, k = p.k;
    std::vector<float> opa(m * k), opb(n * k);  // op(A) row i and op(B) column j, each contiguous over k
    for (int bi = 0; bi < p.batch; bi++) {
        const size_t ao = (size_t)(bi * a.stride), bo = (size_t)(bi * b.stride);
        const size_t co = (size_t)(bi * c.stride), dof = (size_t)(bi * dd.stride);
        for (size_t i = 0; i < m; i++)
            for (size_t kk = 0; kk < k; kk++)  // op(A)(i,kk) = A(i,kk) or A(kk,i), column-major
                opa[i * k + kk] = load(A, a.type, ao + (ta ? i * a.ld + kk : kk * a.ld + i));
        for (size_t j = 0; j < n; j++)
            for (size_t kk = 0; kk < k; kk++)  // op(B)(kk,j) = B(kk,j) or B(j,kk)
                opb[j * k + kk] = load(B, b.type, bo + (tb ? kk * b.ld + j : j * b.ld + kk));
        if (p.bgrada || p.bgradb) {  // bias gradient: sums over the k dimension of op(A) rows or op(B) columns
            const size_t len = p.bgrada ? m : n;
            const std::vector<float>& src = p.bgrada ? opa : opb;
            for (size_t r = 0; r < len; r++) {
                double s = 0;
                for (size_t kk = 0; kk < k; kk++) s += src[r * k + kk];
                store(d.bias, p.bias_type, (size_t)(bi * d.bias_batch_stride) + r, s);
            }
        }
        std::vector<double> unrounded(p.dgelu_bgrad ? m * n : 0);  // DGELU_BGRAD sums D before its rounding
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < n; j++) {
            for (size_t i = 0; i < m; i++) {
                double acc = dot(&opa[i * k], &opb[j * k], k, algo.splits);
                acc *= alpha;
                if (beta != 0.0f) acc += (double)beta * load(C, c.type, co + j * c.ld + i);  // C unread when beta == 0
                if (p.bias_in) acc += load(d.bias, p.bias_type, (size_t)(bi * d.bias_batch_stride) + i);
                const size_t ai = (size_t)(bi * d.aux_batch_stride) + j * d.aux_ld + i;
                if (p.dgelu) acc *= gelu_tanh_grad(load(d.aux, p.aux_type, ai));
                else if (p.aux) store(d.aux, p.aux_type, ai, acc);
                if (p.gelu) acc = gelu_tanh(acc);
                if (p.dgelu_bgrad) unrounded[j * m + i] = acc;
                store(Dm, dd.type, dof + j * dd.ld + i, acc);
            }
        }
        for (size_t i = 0; p.dgelu_bgrad && i < m; i++) {  // the GELU gradient's rows summed: the bias gradient
            double sum = 0;
            for (size_t j = 0; j < n; j++) sum += unrounded[j * m + i];
            store(d.bias, p.bias_type, (size_t)(bi * d.bias_batch_stride) + i, sum);
        }
    }
}

// CUDASIM_CUBLASLT_DECLINE names this fused epilogue (or says "all").
bool epilogue_declined(uint32_t e) {
    const char* env = std::getenv("CUDASIM_CUBLASLT_DECLINE");
    if (!env || e == CUBLASLT_EPILOGUE_DEFAULT) return false;
    const char* name = e == CUBLASLT_EPILOGUE_BIAS            ? "BIAS"
                       : e == CUBLASLT_EPILOGUE_GELU_AUX      ? "GELU_AUX"
                       : e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "GELU_AUX_BIAS"
                       : e == CUBLASLT_EPILOGUE_DGELU         ? "DGELU"
                       : e == CUBLASLT_EPILOGUE_BGRADB        ? "BGRADB"
                                                              : "";
    const std::string list = std::string(",") + env + ",";
    return list == ",all," || (*name && list.find(std::string(",") + name + ",") != std::string::npos);
}

// CUDASIM_CUBLASLT_REFUSE_SPLITK names this algorithm's split count.
bool algorithm_refused(const Algo& algo) {
    const char* env = std::getenv("CUDASIM_CUBLASLT_REFUSE_SPLITK");
    return env && std::strtoul(env, nullptr, 10) == algo.splits;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = reinterpret_cast<cublasLtHandle_t>(new Handle);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    delete reinterpret_cast<Handle*>(h);
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasLtGetStatusName(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        default: return "CUBLAS_STATUS_(other)";
    }
}
const char* cublasLtGetStatusString(cublasStatus_t s) { return cublasLtGetStatusName(s); }

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (!l) return CUBLAS_STATUS_INVALID_VALUE;
    *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete L(l);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
    if (!l) return CUBLAS_STATUS_NOT_INITIALIZED;
    Layout& x = *L(l);
    switch (attr) {
        case CUBLASLT_MATRIX_LAYOUT_TYPE: {
            uint32_t t = 0;
            cublasStatus_t s = set(t, buf, size, "CUBLASLT_MATRIX_LAYOUT_TYPE");
            if (s == CUBLAS_STATUS_SUCCESS) x.type = (cudaDataType)t;
            return s;
        }
        case CUBLASLT_MATRIX_LAYOUT_ORDER: return set(x.order, buf, size, "CUBLASLT_MATRIX_LAYOUT_ORDER");
        case CUBLASLT_MATRIX_LAYOUT_ROWS: return set(x.rows, buf, size, "CUBLASLT_MATRIX_LAYOUT_ROWS");
        case CUBLASLT_MATRIX_LAYOUT_COLS: return set(x.cols, buf, size, "CUBLASLT_MATRIX_LAYOUT_COLS");
        case CUBLASLT_MATRIX_LAYOUT_LD: return set(x.ld, buf, size, "CUBLASLT_MATRIX_LAYOUT_LD");
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set(x.batch, buf, size, "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
            return set(x.stride, buf, size, "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
        default: return complain(CUBLAS_STATUS_NOT_SUPPORTED, "matrix layout attribute %d not simulated", (int)attr);
    }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    Desc* x = new Desc;
    x->compute = compute;
    x->scale = scale;
    *d = reinterpret_cast<cublasLtMatmulDesc_t>(x);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete D(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
    if (!d) return CUBLAS_STATUS_NOT_INITIALIZED;
    Desc& x = *D(d);
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set(x.compute, buf, size, "CUBLASLT_MATMUL_DESC_COMPUTE_TYPE");
        case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set(x.scale, buf, size, "CUBLASLT_MATMUL_DESC_SCALE_TYPE");
        case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set(x.pointer_mode, buf, size, "CUBLASLT_MATMUL_DESC_POINTER_MODE");
        case CUBLASLT_MATMUL_DESC_TRANSA: return set(x.transa, buf, size, "CUBLASLT_MATMUL_DESC_TRANSA");
        case CUBLASLT_MATMUL_DESC_TRANSB: return set(x.transb, buf, size, "CUBLASLT_MATMUL_DESC_TRANSB");
        case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(x.epilogue, buf, size, "CUBLASLT_MATMUL_DESC_EPILOGUE");
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(x.bias, buf, size, "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set(x.bias_type, buf, size, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
        case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
            return set(x.bias_batch_stride, buf, size, "CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(x.aux, buf, size, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(x.aux_ld, buf, size, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
            return set(x.aux_batch_stride, buf, size, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE");
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
            return set(x.aux_type, buf, size, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE");
        default: return complain(CUBLAS_STATUS_NOT_SUPPORTED, "matmul descriptor attribute %d not simulated", (int)attr);
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    if (!p) return CUBLAS_STATUS_INVALID_VALUE;
    *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete reinterpret_cast<Preference*>(p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
    if (!p) return CUBLAS_STATUS_NOT_INITIALIZED;
    Preference& x = *reinterpret_cast<Preference*>(p);
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
            return set(x.max_workspace, buf, size, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
            return set(x.min_alignment[0], buf, size, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES");
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
            return set(x.min_alignment[1], buf, size, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES");
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
            return set(x.min_alignment[2], buf, size, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES");
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
            return set(x.min_alignment[3], buf, size, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES");
        default: return CUBLAS_STATUS_SUCCESS;  // other preferences only steer algorithm choice: accepted
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* count) {
    if (!h || !desc || !a || !b || !c || !d || !pref || !results || !count || requested < 1)
        return CUBLAS_STATUS_INVALID_VALUE;
    *count = 0;
    Problem p;
    if (validate(*D(desc), *L(a), *L(b), *L(c), *L(d), p) != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (epilogue_declined(D(desc)->epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;  // the switch above: no line
    // Seen on a GPU (cuBLASLt 13.0, H200): DGELU_BGRAD has algorithms only where the preference allows a workspace.
    if (D(desc)->epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD && reinterpret_cast<Preference*>(pref)->max_workspace == 0)
        return complain(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic: DGELU_BGRAD needs a workspace "
                        "(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES > 0)");
    Algo algo;
    if (choose_algorithm(*reinterpret_cast<Preference*>(pref), *L(a), *L(b), *L(c), *L(d), algo) !=
        CUBLAS_STATUS_SUCCESS)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    // The double-accumulating algorithm first, then the split-K ones; wavesCount models their cost.
    const char* env = std::getenv("CUDASIM_CUBLASLT_FASTEST_SPLITK");
    const unsigned fastest = env ? (unsigned)std::strtoul(env, nullptr, 10) : 1;
    const int available = 1 + (int)(sizeof kSplitChoices / sizeof kSplitChoices[0]);
    for (int r = 0; r < requested && r < available; r++) {
        algo.splits = r == 0 ? 1 : kSplitChoices[r - 1];
        std::memset(&results[r], 0, sizeof results[r]);
        store_algo(algo, results[r].algo);
        results[r].workspaceSize = 0;
        results[r].state = CUBLAS_STATUS_SUCCESS;
        results[r].wavesCount = algo.splits == fastest ? 0.5f : 1.0f + (float)r;
        *count = r + 1;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The configuration of an algorithm the heuristic returned: its id (the simulated algorithms are numbered by their
// split count) and its split-K count; other attributes are reported as 0.
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void* buf, size_t size, size_t* written) {
    Algo a;
    if (!algo || !load_algo(*algo, a)) return complain(CUBLAS_STATUS_INVALID_VALUE, "AlgoConfigGetAttribute: not an algorithm");
    if (size != sizeof(int32_t) || !buf) return complain(CUBLAS_STATUS_INVALID_VALUE, "AlgoConfigGetAttribute: 4-byte buffer expected");
    const int32_t v = attr == CUBLASLT_ALGO_CONFIG_ID || attr == CUBLASLT_ALGO_CONFIG_SPLITK_NUM ? (int32_t)a.splits : 0;
    std::memcpy(buf, &v, sizeof v);
    if (written) *written = sizeof v;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha_p, const void* A,
                              cublasLtMatrixLayout_t a_l, const void* B, cublasLtMatrixLayout_t b_l, const void* beta_p,
                              const void* C, cublasLtMatrixLayout_t c_l, void* Dm, cublasLtMatrixLayout_t d_l,
                              const cublasLtMatmulAlgo_t* algo_p, void*, size_t, cudaStream_t stream) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc || !a_l || !b_l || !c_l || !d_l || !alpha_p || !beta_p || !A || !B || !Dm)
        return complain(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: null argument");
    const Desc& d = *D(desc);
    const Layout &a = *L(a_l), &b = *L(b_l), &c = *L(c_l), &dd = *L(d_l);
    Problem p;
    if (cublasStatus_t s = validate(d, a, b, c, dd, p)) return s;
    if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
        return complain(CUBLAS_STATUS_NOT_SUPPORTED, "only CUBLASLT_POINTER_MODE_HOST (alpha, beta on the host) is simulated");
    // A null algo is an implicit heuristic query with the default preferences (every alignment declared 256).
    Algo algo;
    if (!algo_p) {
        if (cublasStatus_t s = choose_algorithm(Preference(), a, b, c, dd, algo)) return s;
    } else if (!load_algo(*algo_p, algo)) {
        return complain(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algo is not one cublasLtMatmulAlgoGetHeuristic "
                                                     "returned");
    }
    if (algorithm_refused(algo)) return CUBLAS_STATUS_NOT_SUPPORTED;
    const float alpha = *static_cast<const float*>(alpha_p), beta = *static_cast<const float*>(beta_p);
    if (beta != 0.0f && !C) return complain(CUBLAS_STATUS_INVALID_VALUE, "beta != 0 with a null C");
    if (cublasStatus_t s = check_alignment(algo, a, A, "A")) return s;
    if (cublasStatus_t s = check_alignment(algo, b, B, "B")) return s;
    if (C && beta != 0.0f) if (cublasStatus_t s = check_alignment(algo, c, C, "C")) return s;
    if (cublasStatus_t s = check_alignment(algo, dd, Dm, "D")) return s;
    check_epilogue_pointers(d, p);
    // Enqueued with copies of everything it reads from the descriptors: they may change or die before it runs.
    cudasim::detail::Work w;
    char what[192];
    std::snprintf(what, sizeof what, "cublasLtMatmul %llux%llux%llu (batch %d, epilogue %u)", (unsigned long long)p.m,
                  (unsigned long long)p.n, (unsigned long long)p.k, p.batch, d.epilogue);
    w.what = what;
    w.run = [d, a, b, c, dd, p, algo, alpha, beta, A, B, C, Dm] { gemm(d, a, b, c, dd, p, algo, alpha, beta, A, B, C, Dm); };
    if (cudasim::detail::enqueue(stream, std::move(w)) != cudaSuccess)
        return complain(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: unknown stream %p", (void*)stream);
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
