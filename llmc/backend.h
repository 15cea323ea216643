// The backend boundary.
//
// The model (llmc/model.h), the optimizer glue and the training loop are templates over a Backend class. They never
// include a backend's headers; train_gpt2.cu / test_gpt2.cu pick one:
//
//   llmc/cpu/cpu_backend.h    CpuBackend   act_t = float           (g++ build: ./train_gpt2_cpu, ./test_gpt2_cpu)
//   llmc/cuda/cuda_backend.h  CudaBackend  act_t = __nv_bfloat16   (nvcc build: ./train_gpt2, ./test_gpt2; and g++ with
//                                                                    the simulator's headers for tests)
//
// Every backend has the same members with the same signatures (only act_t differs): the op list below
// (BackendOps), with the math and the conventions of each op, written here once. Each backend header ends with
// static_assert(satisfies_backend_contract<ItsBackend>()), so a backend that lacks an op, or declares one with
// another signature, does not compile, and the message names the op (test/e2e/backend_contract_test.sh).
//
// Conventions shared by all backends:
//   - "device" pointers are whatever the backend computes on (host memory for the CPU backend);
//   - act_t holds parameters and activations; gradients of parameters, the optimizer state, the layernorm statistics
//     and the losses are float;
//   - parameter gradients are accumulated with +=, activation gradients are written with =, except on the residual
//     stream, where layernorm_backward adds into dinp (+=);
//   - all ops are enqueued on the backend's main stream in call order; copy_to_host synchronises;
//   - sizes are size_t; N = B*T rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace llmc {

// Element types that cross the backend boundary (collectives, conversions). The integer types are for the comm's
// host channel (llmc/comm.h: control data such as flags, sizes and checksums); the model computes in F32 and BF16.
enum class DType { F32, BF16, I32, U64 };
inline size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: case DType::I32: return 4;
        case DType::BF16: return 2;
        case DType::U64: return 8;
    }
    return 0;
}
const char* dtype_name(DType t);  // "f32", "bf16", "i32", "u64" (llmc/comm.cpp)

// Options a backend is created with (the subset of the command line a backend cares about).
struct BackendOptions {
    int device = 0;          // GPU index (local rank); ignored on the CPU
    int num_threads = 0;     // CPU threads (0 = OpenMP default)
    bool recompute_gelu = false;  // -r >= 1 (the model drops the saved GELU output and recomputes it in backward)
    bool gemm_tuning = true;      // CUDA: time the heuristic's GEMM algorithms on first use (docs/cuda.md, "Tuned GEMMs")
    bool bias_grad_epilogue = true;  // CUDA: bias gradients by cuBLASLt's BGRADB epilogue, else by column sums
    uint64_t seed = 1337;    // base seed of anything random inside the backend
};

// Typed handles of a backend's streams and events (cudaStream_t and cudaEvent_t on CUDA; null on the CPU, where
// everything runs in program order). A null Stream is the backend's default order (CUDA's legacy default stream).
struct Stream {
    constexpr Stream(std::nullptr_t = nullptr) {}
    explicit constexpr Stream(void* h) : handle(h) {}
    void* handle = nullptr;
};
struct Event {
    constexpr Event(std::nullptr_t = nullptr) {}
    explicit constexpr Event(void* h) : handle(h) {}
    void* handle = nullptr;
};

// A backend allocation freed when it goes out of scope, also when an exception unwinds (the trainer's and the
// checkpointer's small buffers: loss accumulators, flags).
template <class Backend, class T>
class DeviceArray {
public:
    DeviceArray(Backend& be, size_t n) : be_(be), p_(static_cast<T*>(be.alloc(n * sizeof(T)))) {}
    ~DeviceArray() { be_.free(p_); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    T* get() const { return p_; }

private:
    Backend& be_;
    T* p_;
};

// n fp32 values of backend memory, zeroed (optimizer state, gradient buffers); freed by the caller (be.free).
template <class Backend>
float* alloc_zeroed_floats(Backend& be, size_t n) {
    float* p = static_cast<float*>(be.alloc(n * sizeof(float)));
    be.memset_zero(p, n * sizeof(float));
    return p;
}

// One device buffer of a memory plan (--dry-run, llmc/memory_plan.h): the model's activations and each backend's
// scratch_plan() are lists of these. The shape is in the model's symbols: L layers, B, T, N = B*T rows, C channels,
// NH heads, Vp padded vocabulary.
struct BufferSize {
    const char* name = "";
    std::string shape;
    size_t count = 0, elem_bytes = 0;
    size_t bytes() const { return count * elem_bytes; }
};

// ---- the op list --------------------------------------------------------------------------------------------------
// The type of every member a backend has, with its semantics. Shapes use N = B*T rows, C channels, OC output channels,
// NH heads, hs = C/NH, V real vocab, Vp padded vocab. Matrices are row-major; weights are (out, in) as in the model
// file, so a linear layer is out = inp @ W^T + b. Besides these: a constructor from const BackendOptions&, the type
// act_t, and the constants act_dtype (DType), name and attention_state_shape (const char*). A backend may declare a
// member from its type here (`BackendOps<act_t>::relu2_forward relu2_forward;` declares that member function), so
// the signature is written once: LLMC_BACKEND_DECLARE_OPS below.
template <class Act>
struct BackendOps {
    using act_t = Act;

    // ---- memory ------------------------------------------------------------------------------------------------
    using alloc = void*(size_t bytes);  // zero-initialised, at least 64-byte aligned; throws on failure
    using free = void(void* p);
    using memset_zero = void(void* p, size_t bytes);
    using copy_to_device = void(void* dst, const void* host_src, size_t bytes);  // host_src reusable on return
    using copy_to_host = void(void* host_dst, const void* src, size_t bytes);    // synchronises
    using copy_on_device = void(void* dst, const void* src, size_t bytes);
    // The model's input tokens reach the device through this copy (n token ids, host -> device). A backend may keep
    // the host copy for its own host-side work on those tokens: the CUDA backend's encoder_backward groups positions
    // by token from it instead of reading the tokens back (which would wait for the device).
    using upload_tokens = void(int* dst, const int* host_src, size_t n);
    // Conversions between host fp32 and act_t on the device (model loading / saving, parameter broadcast); the
    // downloads synchronise.
    using upload_floats = void(act_t* dst, const float* host_src, size_t n);
    using download_floats = void(float* host_dst, const act_t* src, size_t n);
    using floats_to_act = void(act_t* dst, const float* src, size_t n);  // both on the device, round to nearest
    using act_to_floats = void(float* dst, const act_t* src, size_t n);
    using synchronize = void();
    // The backend's own buffers at the sizes a training step of the model with this shape grows them to (for the
    // memory plan, llmc/memory_plan.h; nothing is allocated). Static.
    using scratch_plan = std::vector<BufferSize>(size_t B, size_t T, size_t C, size_t NH, const BackendOptions& opt);
    // Peak dense bf16 FLOP/s of the device, for MFU; 0 when not meaningful (the CPU), then MFU is not reported.
    using peak_flops = double() const;
    // The GPU index the program chose (BackendOptions::device, from the local rank); the CPU reports it too, so the
    // choice is visible and tested on any machine.
    using device = int() const;
    // The GEMM algorithm choices made so far, as text (one line each; "" where there are none, as on the CPU), and
    // choices of an earlier run to reuse (docs/cuda.md, "Tuned GEMMs"; llmc/gemm_record.h).
    using gemm_choices = std::string() const;
    using load_gemm_choices = void(const std::string& text);

    // ---- streams and events -----------------------------------------------------------------------------------
    // Ops run on the main stream in call order; the comm stream carries the collectives that overlap backward.
    using main_stream = Stream();
    using comm_stream = Stream();
    using comm_waits_main = void();  // work enqueued on comm_stream after this call sees everything before it on main
    using main_waits_comm = void();  // and the reverse
    // Events order one buffer's reuse between the streams without waiting for a whole stream (ZeRO 2's bucket
    // buffers, llmc/grad_reducer.h). A reusable event; record: it completes once `stream`'s work so far is done;
    // wait: `stream`'s later work waits for the last record.
    using event_create = Event();
    using event_destroy = void(Event event);
    using event_record = void(Event event, Stream stream);
    using stream_wait_event = void(Stream stream, Event event);

    // ---- forward ops -------------------------------------------------------------------------------------------
    // out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]                                  out (B,T,C)
    // wpe may be null (an architecture without position embeddings): out[b,t,:] = wte[inp[b,t],:]
    using encoder_forward = void(act_t* out, const int* inp, const act_t* wte, const act_t* wpe, size_t B, size_t T,
                                 size_t C);
    // out = (inp - mean) * rstd * w + b per row; saves mean, rstd (N) for backward. eps = 1e-5, biased variance.
    using layernorm_forward = void(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w,
                                   const act_t* b, size_t N, size_t C);
    // residual = inp1 + inp2, then out = layernorm(residual) as above.
    using fused_residual_layernorm_forward = void(act_t* residual, act_t* out, float* mean, float* rstd,
                                                  const act_t* inp1, const act_t* inp2, const act_t* w,
                                                  const act_t* b, size_t N, size_t C);
    // out (N,OC) = inp (N,C) @ w^T (w is (OC,C)) + bias (OC, may be null).
    // If pre_gelu is not null: pre_gelu = inp @ w^T + bias and out = gelu(pre_gelu) (tanh approximation).
    using matmul_forward = void(act_t* out, const act_t* inp, const act_t* w, const act_t* bias, size_t N, size_t C,
                                size_t OC, act_t* pre_gelu);
    // out = gelu(inp), tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  n elements.
    using gelu_forward = void(act_t* out, const act_t* inp, size_t n);
    // Causal self-attention. qkv (B,T,3C) holds q, k, v for each position (each C wide, heads contiguous inside).
    // out (B,T,C) = softmax(q k^T / sqrt(hs), causal) @ v, heads concatenated. `state` is what the forward saves for
    // the backward, attention_state_elems(B, T, NH) floats whose meaning is the backend's own (described by the
    // constant attention_state_shape): the CPU keeps the probabilities, the CUDA backend a log-sum-exp per row.
    using attention_forward = void(act_t* out, float* state, const act_t* qkv, size_t B, size_t T, size_t C,
                                   size_t NH);
    using attention_state_elems = size_t(size_t B, size_t T, size_t NH);  // static
    // Fails unless the backend can run attention with C channels in NH heads. Static.
    using check_attention_shape = void(size_t C, size_t NH);
    // Fused classifier. logits (N,Vp): columns >= V are ignored. losses[i] = -log softmax(logits[i,:V])[targets[i]].
    // If write_dlogits: logits is overwritten with dloss * (softmax - onehot(target)) in columns < V and 0 in the
    // padded columns (dloss is the gradient of the total loss with respect to each row's loss, e.g. 1/(B*T*accum)).
    using fused_classifier = void(act_t* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                                  size_t Vp, bool write_dlogits);

    // ---- backward ops ------------------------------------------------------------------------------------------
    // For out = inp @ w^T + bias: dinp (N,C) = dout @ w (written, =); dweight (OC,C) += dout^T @ inp;
    // dbias (OC) += column sums of dout (dbias may be null).
    // If pre_gelu is not null, dout is the gradient with respect to gelu(pre_gelu): it is first overwritten in place
    // with the gradient with respect to pre_gelu (dout *= gelu'(pre_gelu)).
    // If dinp_pre_gelu is not null, inp = gelu(dinp_pre_gelu) (N,C) and dinp is the gradient with respect to
    // dinp_pre_gelu instead: dinp = (dout @ w) * gelu'(dinp_pre_gelu) (the CUDA backend fuses it into the GEMM).
    using matmul_backward = void(act_t* dinp, float* dweight, float* dbias, act_t* dout, const act_t* inp,
                                 const act_t* w, size_t N, size_t C, size_t OC, const act_t* pre_gelu,
                                 const act_t* dinp_pre_gelu);
    // dinp (N,C) += dL/dinp (residual stream: added); dweight, dbias (C) +=.
    using layernorm_backward = void(act_t* dinp, float* dweight, float* dbias, const act_t* dout, const act_t* inp,
                                    const act_t* w, const float* mean, const float* rstd, size_t N, size_t C);
    // dqkv (B,T,3C) = gradient of attention_forward's out with respect to qkv (written, =), given the forward's qkv,
    // out and state (out is not read by the CPU backend; the CUDA backend needs it).
    using attention_backward = void(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out,
                                    const float* state, size_t B, size_t T, size_t C, size_t NH);
    // dwte (Vp,C) += scatter of dout by token; dwpe (maxT,C) += sum over b of dout[b,t] (dwpe may be null: no position
    // embedding). Deterministic: the result does not depend on thread scheduling.
    using encoder_backward = void(float* dwte, float* dwpe, const act_t* dout, const int* inp, size_t B, size_t T,
                                  size_t C);

    // ---- the speedrun recipe's ops (docs/speedrun.md; constants in llmc/speedrun_recipe.h) -------------------------
    // RMSNorm without a gain, per row: rstd = 1 / sqrt(mean(x^2) + kRmsNormEps), out = x rstd; saves rstd (N).
    using rmsnorm_forward = void(act_t* out, float* rstd, const act_t* inp, size_t N, size_t C);
    // residual = inp1 + inp2, then out = rmsnorm(residual) as above.
    using fused_residual_rmsnorm_forward = void(act_t* residual, act_t* out, float* rstd, const act_t* inp1,
                                                const act_t* inp2, size_t N, size_t C);
    // dinp (N,C) += dL/dinp of out = rmsnorm(inp) (residual stream: added), given the forward's rstd:
    // dinp += rstd (dout - xhat mean(dout xhat)), xhat = inp rstd.
    using rmsnorm_backward = void(act_t* dinp, const act_t* dout, const act_t* inp, const float* rstd, size_t N,
                                  size_t C);
    // QK-norm then rotary embeddings, in place on the q and k parts of qkv (B,T,3C) (v untouched): per head of
    // hs = C/NH channels, RMSNorm without a gain, then the pairs (i, i + hs/2) turn by t theta_i (llmc/rotary_table.h;
    // `table`: that table in device memory, fp32, at least T rows). Saves rstd (B*T, 2 NH): the q heads, then the k
    // heads. The backward works in place on dqkv's q and k parts (dv untouched), from the forward's output (qkv).
    using qk_norm_rotary_forward = void(act_t* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C,
                                        size_t NH);
    using qk_norm_rotary_backward = void(act_t* dqkv, const act_t* qkv, const float* rstd, const float* table,
                                         size_t B, size_t T, size_t C, size_t NH);
    // out = max(x, 0)^2 (n elements); backward: dout *= 2 max(pre, 0) in place (the gradient with respect to pre).
    using relu2_forward = void(act_t* out, const act_t* inp, size_t n);
    using relu2_backward_inplace = void(act_t* dout, const act_t* pre, size_t n);
    // fused_classifier on the soft-capped logits c = cap tanh(z / cap) (cap 0: c = z, the plain classifier): losses
    // of c; with write_dlogits, z <- dloss (softmax(c) - onehot(target)) (1 - (c / cap)^2) in columns < V, 0 past V.
    using softcap_classifier = void(act_t* logits, float* losses, const int* targets, float dloss, size_t N,
                                    size_t V, size_t Vp, bool write_dlogits, float cap);
    // The ShortcutsTweaks record's scalar mixes; each scalar is one act_t parameter on the device (read there), each
    // scalar gradient one fp32 accumulator (+=), summed deterministically.
    // Embedding skip: out = l0 x + l1 x0 (n elements). Backward: dx = l0 dout (written; dx may alias dout),
    // dx0 += l1 dout, *dl0 += sum(dout x), *dl1 += sum(dout x0).
    using embed_skip_forward = void(act_t* out, const act_t* x, const act_t* x0, const act_t* l0, const act_t* l1,
                                    size_t n);
    using embed_skip_backward = void(act_t* dx, act_t* dx0, float* dl0, float* dl1, const act_t* dout, const act_t* x,
                                     const act_t* x0, const act_t* l0, const act_t* l1, size_t n);
    // Value residual, in place on the v part of qkv (N rows of 3C, v in columns 2C..3C): v_pre = v (saved, N x C),
    // v = (1 - lam) v + lam v1, v1 the v part of qkv1 (the first layer's). Backward, in place on dqkv's v part dv:
    // dv1 (N x C, fp32) += lam dv, *dlam += sum(dv (v1 - v_pre)), then dv = (1 - lam) dv. And the first layer's
    // share: dqkv's v part += dv1 (value_residual_add).
    using value_residual_forward = void(act_t* qkv, act_t* v_pre, const act_t* qkv1, const act_t* lam, size_t N,
                                        size_t C);
    using value_residual_backward = void(act_t* dqkv, float* dv1, float* dlam, const act_t* v_pre, const act_t* qkv1,
                                         const act_t* lam, size_t N, size_t C);
    using value_residual_add = void(act_t* dqkv, const float* dv1, size_t N, size_t C);
    // Muon on one rows x cols matrix (row-major), with fp32 master weights:
    //   g = grad_scale grads;  momentum = mu momentum + g;  u = g + mu momentum (nesterov) or momentum
    //   master -= lr sqrt(max(1, rows / cols)) newton_schulz(u)      (5 quintic iterations, llmc/speedrun_recipe.h)
    //   params = master rounded to act_t (CUDA: stochastically with random bits hash(seed, seed_offset + i), as
    //   adamw_update). master and params may alias when act_t is float.
    using muon_update = void(act_t* params, float* master, const float* grads, float* momentum, size_t rows,
                             size_t cols, float lr, float mu, bool nesterov, float grad_scale, uint32_t seed,
                             size_t seed_offset);

    // ---- reductions and the optimizer --------------------------------------------------------------------------
    // *acc += scale * sum(x[0..n))   (acc is a device float; used to accumulate the loss without a host sync)
    using sum_into = void(float* acc, const float* x, size_t n, float scale);
    // *acc += sum(g[i]^2)            (the squared global norm of a gradient shard, device float)
    using norm_squared_into = void(float* acc, const float* g, size_t n);
    // dst[i] += src[i]               (ZeRO 2: add a reduced micro-step into the sharded accumulator)
    using add_into = void(float* dst, const float* src, size_t n);
    // Gradients in bf16 on the wire (--reduce-dtype bf16), enqueued on `stream` (the comm stream); dst/src of the
    // bf16 side are uint16 bit patterns:
    //   grads_to_bf16:   dst[i] = bf16(src[i]), round to nearest even;   grads_from_bf16: dst[i] = float(src[i]), exact
    using grads_to_bf16 = void(void* dst, const float* src, size_t n, Stream stream);
    using grads_from_bf16 = void(float* dst, const void* src, size_t n, Stream stream);
    // AdamW on n elements (PyTorch semantics, decoupled weight decay):
    //   g = grad_scale * grads[i]
    //   m = beta1 m + (1-beta1) g;   v = beta2 v + (1-beta2) g^2
    //   mhat = m / (1 - beta1^t);    vhat = v / (1 - beta2^t)
    //   master -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * master)
    //   params[i] = master rounded to act_t (the CUDA backend rounds stochastically with random bits
    //               hash(seed, seed_offset + i); the CPU copies).
    // t is the 1-based step. master and params may alias when act_t is float.
    using adamw_update = void(act_t* params, float* master, const float* grads, float* m, float* v, size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                              uint32_t seed, size_t seed_offset);
};

// The contract of backend B: the op list at its act_t.
template <class B>
using BackendContract = BackendOps<typename B::act_t>;

// ---- the compile-time check ------------------------------------------------------------------------------------
// X-lists of the contract's names: member functions, static functions, constants.
#define LLMC_BACKEND_MEMBER_OPS(X)                                                                                   \
    X(alloc) X(free) X(memset_zero) X(copy_to_device) X(copy_to_host) X(copy_on_device) X(upload_tokens)             \
    X(upload_floats) X(download_floats) X(floats_to_act) X(act_to_floats) X(synchronize) X(peak_flops) X(device)     \
    X(gemm_choices) X(load_gemm_choices)                                                                           \
    X(main_stream) X(comm_stream) X(comm_waits_main) X(main_waits_comm) X(event_create) X(event_destroy)             \
    X(event_record) X(stream_wait_event) X(encoder_forward) X(layernorm_forward) X(fused_residual_layernorm_forward) \
    X(matmul_forward) X(gelu_forward) X(attention_forward) X(fused_classifier) X(matmul_backward)                    \
    X(layernorm_backward) X(attention_backward) X(encoder_backward) X(sum_into) X(norm_squared_into) X(add_into)     \
    X(grads_to_bf16) X(grads_from_bf16) X(adamw_update) LLMC_BACKEND_SPEEDRUN_OPS(X)
// The speedrun recipe's ops. Both backends declare them from this list (LLMC_BACKEND_DECLARE_OPS: one member per
// name, of the op list's type), as they have the same signatures and nothing backend-specific to say.
#define LLMC_BACKEND_SPEEDRUN_OPS(X)                                                                                 \
    X(rmsnorm_forward) X(fused_residual_rmsnorm_forward) X(rmsnorm_backward) X(qk_norm_rotary_forward)               \
    X(qk_norm_rotary_backward) X(relu2_forward) X(relu2_backward_inplace) X(softcap_classifier) X(muon_update)       \
    X(embed_skip_forward) X(embed_skip_backward) X(value_residual_forward) X(value_residual_backward)                 \
    X(value_residual_add)
#define LLMC_BACKEND_DECLARE_OP(NAME) BackendOps<act_t>::NAME NAME;
#define LLMC_BACKEND_DECLARE_OPS(LIST) LIST(LLMC_BACKEND_DECLARE_OP)
#define LLMC_BACKEND_STATIC_OPS(X)                                                                                   \
    X(scratch_plan) X(attention_state_elems) X(check_attention_shape)

namespace backend_contract {

// Detection idiom: has_NAME<B> is true when &B::NAME names one member; NAME_ok<B> when its type is the contract's
// (a pointer to member function for the member ops, a plain function pointer for the static ones).
#define LLMC_BACKEND_DETECT(NAME, POINTER)                                                                           \
    template <class B, class = void>                                                                                 \
    struct has_##NAME : std::false_type {};                                                                          \
    template <class B>                                                                                               \
    struct has_##NAME<B, std::void_t<decltype(&B::NAME)>> : std::true_type {};                                      \
    template <class B, class = void>                                                                                 \
    struct NAME##_ok : std::false_type {};                                                                           \
    template <class B>                                                                                               \
    struct NAME##_ok<B, std::void_t<decltype(&B::NAME)>>                                                             \
        : std::is_same<decltype(&B::NAME), typename BackendContract<B>::NAME POINTER> {};
#define LLMC_BACKEND_DETECT_MEMBER(NAME) LLMC_BACKEND_DETECT(NAME, B::*)
#define LLMC_BACKEND_DETECT_STATIC(NAME) LLMC_BACKEND_DETECT(NAME, *)
LLMC_BACKEND_MEMBER_OPS(LLMC_BACKEND_DETECT_MEMBER)
LLMC_BACKEND_STATIC_OPS(LLMC_BACKEND_DETECT_STATIC)

template <class B, class = void>
struct has_act_t : std::false_type {};
template <class B>
struct has_act_t<B, std::void_t<typename B::act_t>> : std::true_type {};
}  // namespace backend_contract

#define LLMC_BACKEND_CHECK(NAME)                                                                                     \
    static_assert(backend_contract::has_##NAME<B>::value,                                                            \
                  "backend op '" #NAME "' is missing (or overloaded): the op list is in llmc/backend.h");            \
    static_assert(!backend_contract::has_##NAME<B>::value || backend_contract::NAME##_ok<B>::value,                  \
                  "backend op '" #NAME "' does not have the signature llmc/backend.h gives it");
#define LLMC_BACKEND_CHECK_CONSTANT(NAME, TYPE)                                                                      \
    static_assert(std::is_same<std::remove_cv_t<decltype(B::NAME)>, TYPE>::value,                                    \
                  "backend constant '" #NAME "' is not a " #TYPE " (llmc/backend.h)");

// True, or the build fails with one message per missing or mistyped op. Each backend header asserts it.
template <class B>
constexpr bool satisfies_backend_contract() {
    static_assert(backend_contract::has_act_t<B>::value, "backend type 'act_t' is missing (llmc/backend.h)");
    static_assert(std::is_constructible<B, const BackendOptions&>::value,
                  "backend constructor from const BackendOptions& is missing (llmc/backend.h)");
    LLMC_BACKEND_CHECK_CONSTANT(act_dtype, DType)
    LLMC_BACKEND_CHECK_CONSTANT(name, const char*)
    LLMC_BACKEND_CHECK_CONSTANT(attention_state_shape, const char*)
    LLMC_BACKEND_MEMBER_OPS(LLMC_BACKEND_CHECK)
    LLMC_BACKEND_STATIC_OPS(LLMC_BACKEND_CHECK)
    return true;
}

}  // namespace llmc
