// CPU backend: every op in fp32, OpenMP loops, matmuls through OpenBLAS sgemm. The readable reference of every op:
// what each member computes is in llmc/backend.h (the op list); the declarations here are grouped by the file that
// implements them.
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
    static constexpr const char* attention_state_shape = "B x NH x T x T (probabilities)";

    explicit CpuBackend(const BackendOptions& opt = BackendOptions());
    ~CpuBackend();
    CpuBackend(const CpuBackend&) = delete;
    CpuBackend& operator=(const CpuBackend&) = delete;

    // cpu_memory.cpp: "device" memory is host memory, every op is synchronous.
    void* alloc(size_t bytes);
    void free(void* p);
    void memset_zero(void* p, size_t bytes);
    void copy_to_device(void* dst, const void* host_src, size_t bytes);
    void copy_to_host(void* host_dst, const void* src, size_t bytes);
    void copy_on_device(void* dst, const void* src, size_t bytes);
    void upload_tokens(int* dst, const int* host_src, size_t n);
    void upload_floats(act_t* dst, const float* host_src, size_t n);
    void download_floats(float* host_dst, const act_t* src, size_t n);
    void floats_to_act(act_t* dst, const float* src, size_t n);
    void act_to_floats(float* dst, const act_t* src, size_t n);
    void synchronize();
    void sum_into(float* acc, const float* x, size_t n, float scale);
    void norm_squared_into(float* acc, const float* g, size_t n);
    void add_into(float* dst, const float* src, size_t n);
    void grads_to_bf16(void* dst, const float* src, size_t n, Stream stream);
    void grads_from_bf16(float* dst, const void* src, size_t n, Stream stream);

    // No device: no peak FLOP/s (MFU is not reported); the chosen GPU index is reported like the CUDA backend's.
    double peak_flops() const { return 0.0; }
    int device() const { return device_; }
    std::string gemm_choices() const { return ""; }    // OpenBLAS chooses its own kernels: nothing to record
    void load_gemm_choices(const std::string&) {}
    // One stream: everything runs in program order, so the streams and events are null and ordering is a no-op.
    Stream main_stream() { return Stream(); }
    Stream comm_stream() { return Stream(); }
    void comm_waits_main() {}
    void main_waits_comm() {}
    Event event_create() { return Event(); }
    void event_destroy(Event) {}
    void event_record(Event, Stream) {}
    void stream_wait_event(Stream, Event) {}

    // cpu_encoder.cpp
    void encoder_forward(act_t* out, const int* inp, const act_t* wte, const act_t* wpe, size_t B, size_t T, size_t C);
    void encoder_backward(float* dwte, float* dwpe, const act_t* dout, const int* inp, size_t B, size_t T, size_t C);
    // cpu_layernorm.cpp
    void layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w, const act_t* b,
                           size_t N, size_t C);
    void fused_residual_layernorm_forward(act_t* residual, act_t* out, float* mean, float* rstd,
                                          const act_t* inp1, const act_t* inp2, const act_t* w, const act_t* b,
                                          size_t N, size_t C);
    void layernorm_backward(act_t* dinp, float* dweight, float* dbias, const act_t* dout, const act_t* inp,
                            const act_t* w, const float* mean, const float* rstd, size_t N, size_t C);
    // cpu_matmul.cpp
    void matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias,
                        size_t N, size_t C, size_t OC, act_t* pre_gelu = nullptr);
    void matmul_backward(act_t* dinp, float* dweight, float* dbias, act_t* dout, const act_t* inp, const act_t* w,
                         size_t N, size_t C, size_t OC, const act_t* pre_gelu = nullptr,
                         const act_t* dinp_pre_gelu = nullptr);
    void gelu_forward(act_t* out, const act_t* inp, size_t n);
    // cpu_attention.cpp: the saved state is the softmax probabilities att (B,NH,T,T), 0 above the diagonal; any
    // C % NH == 0 works. scratch_plan: attention_backward's per-thread rows.
    static size_t attention_state_elems(size_t B, size_t T, size_t NH) { return B * NH * T * T; }
    static void check_attention_shape(size_t C, size_t NH);
    static std::vector<BufferSize> scratch_plan(size_t B, size_t T, size_t C, size_t NH, const BackendOptions& opt);
    void attention_forward(act_t* out, float* state, const act_t* qkv, size_t B, size_t T, size_t C, size_t NH);
    void attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out, const float* state,
                            size_t B, size_t T, size_t C, size_t NH);
    // cpu_classifier.cpp
    void fused_classifier(act_t* logits, float* losses, const int* targets, float dloss,
                          size_t N, size_t V, size_t Vp, bool write_dlogits);
    // cpu_adamw.cpp: params is a copy of master (no rounding in fp32)
    void adamw_update(act_t* params, float* master, const float* grads, float* m, float* v, size_t n,
                      float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t, uint32_t seed, size_t seed_offset = 0);
    // cpu_speedrun.cpp: the speedrun recipe's ops, declared from the op list (llmc/backend.h)
    LLMC_BACKEND_DECLARE_OPS(LLMC_BACKEND_SPEEDRUN_OPS)

private:
    int device_ = 0;
    int num_threads_ = 0;
    // Scratch owned by the backend (attention_backward's per-thread rows); grows on demand, freed in the destructor.
    float* scratch_ = nullptr;
    size_t scratch_count_ = 0;
    float* scratch(size_t count);
};

static_assert(satisfies_backend_contract<CpuBackend>(), "CpuBackend does not satisfy llmc/backend.h");

}  // namespace llmc
