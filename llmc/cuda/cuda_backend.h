// CUDA backend: bf16 activations and parameters, fp32 gradients / master weights / optimizer state, handwritten
// kernels (llmc/cuda/*.cuh, one family per file) and cuBLASLt for every matmul. What each op computes is in
// llmc/backend.h (the op list); everything is enqueued on the main stream in call order, and copy_to_host and the
// downloads synchronise.
//
// One context object: a CudaBackend owns the device choice, the main and comm streams, the events that order them,
// the cuBLASLt handle and workspace (with its per-shape plan cache), the device properties and the op-private scratch
// buffers (each named for the one op that uses it). No CUDA state lives in globals.
//
// peak_flops() = SMs x dense bf16 FLOP per clock per SM (from the compute capability) x the reported clock x a
// per-architecture clock ratio (llmc/cuda/device_info.h): H100 SXM 132 x 4096 x 1.98 GHz x 1830/1980 = 989.4 TFLOP/s.
// Unknown architectures (or an unreadable clock) give 0: MFU is then not reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "../backend.h"
#include "device_info.h"
#include "device_limits.h"
#include "encoder_groups.h"
#include "gemm_tuning.h"

namespace llmc {

class GemmRunner;

class CudaBackend {
public:
    using act_t = __nv_bfloat16;
    static constexpr DType act_dtype = DType::BF16;
    static constexpr const char* name = "cuda";

    explicit CudaBackend(const BackendOptions& opt = BackendOptions());
    ~CudaBackend();
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    // Host <-> device (cuda_backend.cu). The uploads return once the host source has been staged; the downloads
    // wait for the main stream. upload_tokens keeps the host tokens for encoder_backward's grouping.
    void* alloc(size_t bytes);  // zero-initialised device memory (cudaMalloc: 256-byte aligned)
    void free(void* p);
    void copy_to_device(void* dst, const void* host_src, size_t bytes);
    void upload_tokens(int* dst, const int* host_src, size_t n);
    void upload_floats(act_t* dst, const float* host_src, size_t n);  // host fp32 -> device bf16 (nearest even)
    void copy_to_host(void* host_dst, const void* src, size_t bytes);
    void download_floats(float* host_dst, const act_t* src, size_t n);
    // On the device, enqueued on the main stream.
    void memset_zero(void* p, size_t bytes);
    void copy_on_device(void* dst, const void* src, size_t bytes);
    void floats_to_act(act_t* dst, const float* src, size_t n);
    void act_to_floats(float* dst, const act_t* src, size_t n);
    void synchronize();  // both streams
    double peak_flops() const { return peak_flops_; }
    // The op-private scratch below and the cuBLASLt workspace, at the sizes a training step grows them to.
    static std::vector<BufferSize> scratch_plan(size_t B, size_t T, size_t C, size_t NH, const BackendOptions& opt);

    // Streams and events: non-blocking CUDA streams, events without timing.
    Stream main_stream() { return Stream(main_); }
    Stream comm_stream() { return Stream(comm_); }
    void comm_waits_main();
    void main_waits_comm();
    Event event_create();
    void event_destroy(Event event);
    void event_record(Event event, Stream stream);
    void stream_wait_event(Stream stream, Event event);

    // The model's ops in the order of its forward, then of its backward; the kernels are in the .cuh file of each
    // family. Attention's saved state is the fp32 base-2 log-sum-exp of each row of scaled scores, (B, NH, T): the
    // backward recomputes the probabilities from it (attention.cuh); hs = C / NH must be 16, 32, 64 or 128.
    static constexpr const char* attention_state_shape = "B x NH x T (log-sum-exp)";
    static size_t attention_state_elems(size_t B, size_t T, size_t NH) { return B * NH * T; }
    static void check_attention_shape(size_t C, size_t NH);
    void encoder_forward(act_t* out, const int* inp, const act_t* wte, const act_t* wpe, size_t B, size_t T, size_t C);
    void layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w, const act_t* b,
                           size_t N, size_t C);
    void matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias,
                        size_t N, size_t C, size_t OC, act_t* pre_gelu = nullptr);
    void attention_forward(act_t* out, float* state, const act_t* qkv, size_t B, size_t T, size_t C, size_t NH);
    void fused_residual_layernorm_forward(act_t* residual, act_t* out, float* mean, float* rstd,
                                          const act_t* inp1, const act_t* inp2, const act_t* w, const act_t* b,
                                          size_t N, size_t C);
    void gelu_forward(act_t* out, const act_t* inp, size_t n);
    void fused_classifier(act_t* logits, float* losses, const int* targets, float dloss,
                          size_t N, size_t V, size_t Vp, bool write_dlogits);
    void matmul_backward(act_t* dinp, float* dweight, float* dbias, act_t* dout, const act_t* inp, const act_t* w,
                         size_t N, size_t C, size_t OC, const act_t* pre_gelu = nullptr,
                         const act_t* dinp_pre_gelu = nullptr);
    void layernorm_backward(act_t* dinp, float* dweight, float* dbias, const act_t* dout, const act_t* inp,
                            const act_t* w, const float* mean, const float* rstd, size_t N, size_t C);
    void attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out, const float* state,
                            size_t B, size_t T, size_t C, size_t NH);
    // Groups positions by token on the host (encoder_groups.h): from the tokens of the last upload_tokens into `inp`
    // without synchronising; otherwise it copies the tokens back, which waits for the stream.
    void encoder_backward(float* dwte, float* dwpe, const act_t* dout, const int* inp, size_t B, size_t T, size_t C);

    // The optimizer's kernels (reduce.cuh, adamw.cuh; stochastic rounding to bf16).
    void norm_squared_into(float* acc, const float* g, size_t n);
    void sum_into(float* acc, const float* x, size_t n, float scale);
    void add_into(float* dst, const float* src, size_t n);
    void grads_to_bf16(void* dst, const float* src, size_t n, Stream stream);
    void grads_from_bf16(float* dst, const void* src, size_t n, Stream stream);
    void adamw_update(act_t* params, float* master, const float* grads, float* m, float* v, size_t n,
                      float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t, uint32_t seed, size_t seed_offset = 0);

    // The speedrun recipe's ops (cuda_backend.cu), declared from the op list: the free functions of speedrun_ops.h on
    // the main stream. Muon's workspace is grown on demand, outside scratch_plan (which knows no optimizer: the
    // model's AdamW never grows it). The scalar mixes' per-block sums go through the reduction partials (sum_into's).
    LLMC_BACKEND_DECLARE_OPS(LLMC_BACKEND_SPEEDRUN_OPS)

    // ---- device information (CUDA-only, but for device(), which is in the op list) ------------------------------
    // Number of usable CUDA devices; 0 (no exception) when there is no GPU or no driver, so that GPU tests can skip.
    static int available_devices();
    int device() const { return device_; }
    int sm_count() const { return sm_count_; }
    int compute_capability() const { return 10 * cc_major_ + cc_minor_; }  // e.g. 90 for sm_90
    const DeviceLimits& device_limits() const { return limits_; }
    double clock_ghz() const { return clock_khz_ * 1e-6; }
    cudaStream_t stream() const { return main_; }
    size_t num_gemm_plans() const;  // distinct cuBLASLt plans built so far (the cache is per shape)
    // GEMM tuning (docs/cuda.md, "Tuned GEMMs"): the choices so far as text (one line per plan), choices of an earlier
    // run to reuse, how many plans were timed / took a recorded choice, and the timer (tests inject one).
    std::string gemm_choices() const;
    void load_gemm_choices(const std::string& text);
    size_t num_gemm_timed() const;
    size_t num_gemm_reused() const;
    size_t num_gemm_declined() const;  // GEMM shapes whose fused epilogue cuBLASLt declined (fallback passes)
    size_t num_gemm_rejected() const;  // heuristic candidates cublasLtMatmul refused (dropped, the next one ran)
    void set_gemm_timer(GemmTimer timer);
    // Op calls whose memory-bound kernels all took the 16-byte vector path, and those where at least one took the
    // scalar path (a row length or count not a multiple of the pack width, or an unaligned pointer: common.cuh).
    // With C a multiple of 8 the model's ops all take the vector path (test_gpt2 checks it).
    size_t vector_path_calls() const { return vector_calls_; }
    size_t scalar_path_calls() const { return scalar_calls_; }

private:
    // A device buffer private to one op, grown on demand (growing synchronises the device, so it happens in the first
    // step only).
    struct Scratch {
        void* ptr = nullptr;
        size_t bytes = 0;
    };
    void* scratch(Scratch& s, size_t bytes);
    void count_path(bool vectorized) { (vectorized ? vector_calls_ : scalar_calls_)++; }
    size_t vector_calls_ = 0, scalar_calls_ = 0;

    int device_ = 0;
    int sm_count_ = 0, cc_major_ = 0, cc_minor_ = 0, clock_khz_ = 0;
    double peak_flops_ = 0.0;
    DeviceLimits limits_;  // shared memory per block / per SM: the kernels' tile and warp counts (read once)
    cudaStream_t main_ = nullptr, comm_ = nullptr;
    cudaEvent_t main_done_ = nullptr, comm_done_ = nullptr;
    std::unique_ptr<GemmRunner> gemm_;

    Scratch attention_rowdot_;          // attention_backward: D = rowsum(dout * out), (B, NH, T) floats
    Scratch layernorm_partials_;        // layernorm_backward: per-block dweight / dbias partial sums
    Scratch bias_partials_;             // matmul_backward: per-block dbias partial sums
    Scratch reduce_partials_;           // sum_into, norm_squared_into, the scalar mixes' backward: block sums
    Scratch encoder_groups_;            // encoder_backward: positions grouped by token (device copy)
    Scratch encoder_slots_;             // encoder_backward: chunk sums of the frequent tokens
    Scratch muon_workspace_;            // muon_update: the update and Newton-Schulz's buffers, the largest matrix's
    // Host -> device copies of up to kStagedUploadBytes (the batch's tokens and targets) go through a ring of
    // pinned buffers: cudaMemcpyAsync from pageable memory waits for the stream to reach the copy, from pinned
    // memory it returns at once, so the host can prepare the next batch while the device works. Each slot's event
    // marks its copy done; a slot is reused kUploadSlots copies later (the device is normally long past it).
    struct PinnedSlot {
        void* host = nullptr;
        size_t bytes = 0;
        cudaEvent_t done = nullptr;
    };
    static constexpr int kUploadSlots = 4;
    static constexpr size_t kStagedUploadBytes = size_t(16) << 20;
    PinnedSlot upload_slots_[kUploadSlots];
    int next_upload_slot_ = 0;
    void staged_upload(void* dst, const void* host_src, size_t bytes);
    int* encoder_tokens_host_ = nullptr;   // pinned: the tokens, copied back for grouping
    int* encoder_groups_host_ = nullptr;   // pinned: the grouping, uploaded from here
    size_t encoder_host_ints_ = 0;         // capacity of each pinned buffer
    std::vector<int> encoder_count_, encoder_next_;  // counting-sort scratch, sized by the largest token seen
    std::vector<int> uploaded_tokens_;               // the host tokens of the last upload_tokens ...
    const int* uploaded_tokens_dst_ = nullptr;       // ... into this device buffer (null: none, or used up)
    int* encoder_prepared_host_[2] = {nullptr, nullptr};  // pinned, double-buffered groupings from uploaded_tokens_
    cudaEvent_t encoder_upload_done_[2] = {nullptr, nullptr};  // their uploads
    size_t encoder_prepared_ints_ = 0;                   // capacity of each
    int encoder_slot_ = 0;                               // the slot the next grouping fills
    // Groups N host tokens into `packed` (see encoder_group_positions) with the counting-sort scratch.
    EncoderGroupSizes group_tokens(int* packed, const int* tokens, size_t N);
    // Groups the uploaded host tokens into a pinned slot and uploads the grouping to encoder_groups_ on the main
    // stream (it waits only for the upload of two calls ago, which left the slot long before).
    EncoderGroupSizes group_uploaded_tokens(size_t N);
    // Copies the device tokens back and groups them (waits for the main stream).
    EncoderGroupSizes group_device_tokens(const int* inp, size_t N);
    // dwte += the grouped sums, from the grouping in encoder_groups_.
    bool encoder_backward_grouped(float* dwte, const act_t* dout, const EncoderGroupSizes& s, size_t C);
};

inline cudaStream_t cuda_stream(Stream s) { return static_cast<cudaStream_t>(s.handle); }
inline cudaEvent_t cuda_event(Event e) { return static_cast<cudaEvent_t>(e.handle); }

static_assert(satisfies_backend_contract<CudaBackend>(), "CudaBackend does not satisfy llmc/backend.h");

}  // namespace llmc
