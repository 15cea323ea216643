// CPU backend: every op in fp32, OpenMP loops, matmuls through OpenBLAS sgemm.
//
// This header is the canonical list of backend ops (see llmc/backend.h for the shared conventions). Shapes use
// N = B*T rows, C channels, OC output channels, NH heads, hs = C/NH, V real vocab, Vp padded vocab.
// Matrices are row-major; weights are (out, in) as in the model file, so a linear layer is out = inp @ W^T + b.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../backend.h"

namespace llmc {

class CpuBackend {
public:
    using act_t = float;
    static constexpr DType act_dtype = DType::F32;
    static constexpr const char* name = "cpu";

    explicit CpuBackend(const BackendOptions& opt = BackendOptions());
    ~CpuBackend();
    CpuBackend(const CpuBackend&) = delete;
    CpuBackend& operator=(const CpuBackend&) = delete;

    // ---- memory ----------------------------------------------------------------------------------------------
    void* alloc(size_t bytes);                 // zero-initialised, 64-byte aligned; throws on failure
    void free(void* p);
    void memset_zero(void* p, size_t bytes);
    void copy_to_device(void* dst, const void* host_src, size_t bytes);
    void copy_to_host(void* host_dst, const void* src, size_t bytes);   // synchronises
    void copy_on_device(void* dst, const void* src, size_t bytes);
    // Conversions between host fp32 and act_t on the device (model loading / saving, parameter broadcast).
    void upload_floats(act_t* dst, const float* host_src, size_t n);
    void download_floats(float* host_dst, const act_t* src, size_t n);
    void floats_to_act(act_t* dst, const float* src, size_t n);          // both on the device, round to nearest
    void act_to_floats(float* dst, const act_t* src, size_t n);
    void synchronize();
    // The backend's own buffers at the sizes a training step of the model with this shape grows them to (for the
    // memory plan, llmc/memory_plan.h; nothing is allocated): attention_backward's per-thread rows.
    static std::vector<BufferSize> scratch_plan(size_t B, size_t T, size_t C, size_t NH, const BackendOptions& opt);
    // Peak dense bf16 FLOP/s of the device, for MFU; 0 when not meaningful (the CPU), then MFU is not reported.
    double peak_flops() const { return 0.0; }
    // The GPU index the program chose (BackendOptions::device, from the local rank): the CPU computes on the host and
    // ignores it, but reports it like the CUDA backend, so the choice is visible and tested on any machine.
    int device() const { return device_; }

    // ---- streams (the CUDA backend overlaps collectives with backward; on the CPU these are no-ops) ----------
    void* main_stream() { return nullptr; }
    void* comm_stream() { return nullptr; }
    void comm_waits_main() {}   // work enqueued on comm_stream after this call sees everything before it on main
    void main_waits_comm() {}   // and the reverse
    // Events order one buffer's reuse between the streams without waiting for a whole stream (the optimizer's ZeRO-2
    // bucket buffers: the main stream rewrites a buffer only once the comm stream's reduction of it is done).
    void* event_create() { return nullptr; }               // a reusable event (nothing to order on the CPU)
    void event_destroy(void* event) {}
    void event_record(void* event, void* stream) {}         // completes once `stream`'s work so far is done
    void stream_wait_event(void* stream, void* event) {}    // `stream`'s later work waits for the last record

    // ---- forward ops -----------------------------------------------------------------------------------------
    // out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]                                  out (B,T,C)
    void encoder_forward(act_t* out, const int* inp, const act_t* wte, const act_t* wpe,
                         size_t B, size_t T, size_t C);
    // out = (inp - mean) * rstd * w + b per row; saves mean, rstd (N) for backward. eps = 1e-5, biased variance.
    void layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w, const act_t* b,
                           size_t N, size_t C);
    // residual = inp1 + inp2, then out = layernorm(residual) as above.
    void fused_residual_layernorm_forward(act_t* residual, act_t* out, float* mean, float* rstd,
                                          const act_t* inp1, const act_t* inp2, const act_t* w, const act_t* b,
                                          size_t N, size_t C);
    // out (N,OC) = inp (N,C) @ w^T (w is (OC,C)) + bias (OC, may be null).
    // If pre_gelu is not null: pre_gelu = inp @ w^T + bias and out = gelu(pre_gelu) (tanh approximation).
    void matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias,
                        size_t N, size_t C, size_t OC, act_t* pre_gelu = nullptr);
    // out = gelu(inp), tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  n elements.
    void gelu_forward(act_t* out, const act_t* inp, size_t n);
    // Causal self-attention. qkv (B,T,3C) holds q, k, v for each position (each C wide, heads contiguous inside).
    // out (B,T,C) = softmax(q k^T / sqrt(hs), causal) @ v, heads concatenated. `state` is what the forward saves for
    // the backward, attention_state_elems(B, T, NH) floats whose meaning is the backend's own: here the softmax
    // probabilities att (B,NH,T,T), 0 above the diagonal (the CUDA backend keeps a log-sum-exp per row instead).
    static size_t attention_state_elems(size_t B, size_t T, size_t NH) { return B * NH * T * T; }
    static constexpr const char* attention_state_shape = "B x NH x T x T (probabilities)";
    // Fails unless the backend can run attention with C channels in NH heads (here: C % NH == 0).
    static void check_attention_shape(size_t C, size_t NH);
    void attention_forward(act_t* out, float* state, const act_t* qkv, size_t B, size_t T, size_t C, size_t NH);
    // Fused classifier. logits (N,Vp): columns >= V are ignored. losses[i] = -log softmax(logits[i,:V])[targets[i]].
    // If write_dlogits: logits is overwritten with dloss * (softmax - onehot(target)) in columns < V and 0 in the
    // padded columns (dloss is the gradient of the total loss with respect to each row's loss, e.g. 1/(B*T*accum)).
    void fused_classifier(act_t* logits, float* losses, const int* targets, float dloss,
                          size_t N, size_t V, size_t Vp, bool write_dlogits);

    // ---- backward ops ----------------------------------------------------------------------------------------
    // For out = inp @ w^T + bias: dinp (N,C) = dout @ w (written, =); dweight (OC,C) += dout^T @ inp;
    // dbias (OC) += column sums of dout (dbias may be null).
    // If pre_gelu is not null, dout is the gradient with respect to gelu(pre_gelu): it is first overwritten in place
    // with the gradient with respect to pre_gelu (dout *= gelu'(pre_gelu)).
    void matmul_backward(act_t* dinp, float* dweight, float* dbias, act_t* dout, const act_t* inp, const act_t* w,
                         size_t N, size_t C, size_t OC, const act_t* pre_gelu = nullptr);
    // dinp (N,C) += dL/dinp (residual stream: added); dweight, dbias (C) +=.
    void layernorm_backward(act_t* dinp, float* dweight, float* dbias, const act_t* dout, const act_t* inp,
                            const act_t* w, const float* mean, const float* rstd, size_t N, size_t C);
    // dqkv (B,T,3C) = gradient of attention_forward's out with respect to qkv (written, =), given the forward's qkv,
    // out and state (out is not read here; the CUDA backend needs it).
    void attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out, const float* state,
                            size_t B, size_t T, size_t C, size_t NH);
    // dwte (Vp,C) += scatter of dout by token; dwpe (maxT,C) += sum over b of dout[b,t]. Deterministic: the result
    // does not depend on thread scheduling.
    void encoder_backward(float* dwte, float* dwpe, const act_t* dout, const int* inp, size_t B, size_t T, size_t C);
    // Called by the model during a forward that backward will follow, with the host copy of that forward's B*T
    // tokens: a backend that needs host-side work for encoder_backward (the CUDA backend groups positions by token)
    // does it here, while the device runs the forward, instead of synchronising in backward. Nothing to do here.
    void encoder_backward_prepare(const int* inp_host, size_t B, size_t T) {}

    // ---- reductions and the optimizer -------------------------------------------------------------------------
    // *acc += scale * sum(x[0..n))   (acc is a device float; used to accumulate the loss without a host sync)
    void sum_into(float* acc, const float* x, size_t n, float scale);
    // *acc += sum(g[i]^2)            (the squared global norm of a gradient shard, device float)
    void norm_squared_into(float* acc, const float* g, size_t n);
    // dst[i] += src[i]               (ZeRO-2: add a reduce-scattered micro-step into the sharded accumulator)
    void add_into(float* dst, const float* src, size_t n);
    // Gradients in bf16 on the wire (--reduce-dtype bf16), enqueued on `stream` (the comm stream):
    //   dst[i] = bf16(src[i])  (uint16 bit patterns, round to nearest even)  /  dst[i] = float(src[i])  (exact)
    void grads_to_bf16(void* dst, const float* src, size_t n, void* stream);
    void grads_from_bf16(float* dst, const void* src, size_t n, void* stream);
    // AdamW on n elements (PyTorch semantics, decoupled weight decay):
    //   g = grad_scale * grads[i]
    //   m = beta1 m + (1-beta1) g;   v = beta2 v + (1-beta2) g^2
    //   mhat = m / (1 - beta1^t);    vhat = v / (1 - beta2^t)
    //   master -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * master)
    //   params[i] = master rounded to act_t (the CUDA backend rounds stochastically with random bits
    //               hash(seed, seed_offset + i); the CPU copies).
    // t is the 1-based step. master and params may alias when act_t is float.
    void adamw_update(act_t* params, float* master, const float* grads, float* m, float* v, size_t n,
                      float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t, uint32_t seed, size_t seed_offset = 0);

private:
    int device_ = 0;
    int num_threads_ = 0;
    // Scratch owned by the backend (attention_backward's per-thread rows); grows on demand, freed in the destructor.
    float* scratch_ = nullptr;
    size_t scratch_count_ = 0;
    float* scratch(size_t count);
};

}  // namespace llmc
