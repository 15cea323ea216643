// CudaBackend: the context object and the host side of every op. The kernels and their launchers live in the
// .cuh files included here (one family per file); this is the only translation unit that includes them, so each
// kernel is defined once in the program.
#include "cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "../bf16.h"
#include "adamw.cuh"
#include "attention.cuh"
#include "classifier.cuh"
#include "common.cuh"
#include "cuda_check.h"
#include "device_info.h"
#include "encoder.cuh"
#include "gelu.cuh"
#include "no_gpu.h"
#include "layernorm.cuh"
#include "matmul.cuh"
#include "reduce.cuh"
#include "speedrun_ops.h"

namespace llmc {

static_assert(sizeof(CudaBackend::act_t) == 2, "bf16 is two bytes");

CudaBackend::CudaBackend(const BackendOptions& opt) : device_(opt.device) {
    int count = 0;
    const cudaError_t found = cudaGetDeviceCount(&count);
    if (is_no_gpu_error((int)found, count)) fail("%s", no_gpu_message((int)found, cudaGetErrorString(found)).c_str());
    CUDA_CHECK(found);
    if (device_ < 0 || device_ >= count) fail("CUDA device %d requested, but %d device(s) are visible", device_, count);
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
    CUDA_CHECK(cudaDeviceGetAttribute(&cc_major_, cudaDevAttrComputeCapabilityMajor, device_));
    CUDA_CHECK(cudaDeviceGetAttribute(&cc_minor_, cudaDevAttrComputeCapabilityMinor, device_));
    // The clock only feeds peak_flops(): if it cannot be read, MFU is not reported rather than the run refused.
    if (cudaDeviceGetAttribute(&clock_khz_, cudaDevAttrClockRate, device_) != cudaSuccess) {
        clock_khz_ = 0;
        cudaGetLastError();
    }
    peak_flops_ = cuda_peak_bf16_flops(sm_count_, cc_major_, cc_minor_, clock_khz_);
    limits_ = read_device_limits(device_);
    CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&main_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    gemm_.reset(new GemmRunner(opt.gemm_tuning));
    gemm_->set_bias_grad_epilogue(opt.bias_grad_epilogue);
    scratch(reduce_partials_, kMaxReducePartials * sizeof(float));
}

// True while an exception unwinds the stack. The program then reports the error and exits (mpirun aborts the other
// ranks), and the device resources are left to the driver: synchronising a stream, or cudaFree (which synchronises
// the whole device), could wait forever for a collective already queued on the comm stream whose peer ranks never
// issue theirs, so this rank would hang before printing its error.
static bool unwinding() { return std::uncaught_exceptions() > 0; }

CudaBackend::~CudaBackend() {
    if (unwinding()) {
        (void)gemm_.release();  // its destructor would cudaFree the workspace
        return;
    }
    // No throwing here: errors at teardown are ignored (the process is ending or already failed).
    if (main_) cudaStreamSynchronize(main_);
    if (comm_) cudaStreamSynchronize(comm_);
    gemm_.reset();
    for (Scratch* s : {&attention_rowdot_, &layernorm_partials_, &bias_partials_, &reduce_partials_, &encoder_groups_,
                       &encoder_slots_, &muon_workspace_})
        if (s->ptr) cudaFree(s->ptr);
    if (encoder_tokens_host_) cudaFreeHost(encoder_tokens_host_);
    if (encoder_groups_host_) cudaFreeHost(encoder_groups_host_);
    for (int s = 0; s < 2; s++) {
        if (encoder_prepared_host_[s]) cudaFreeHost(encoder_prepared_host_[s]);
        if (encoder_upload_done_[s]) cudaEventDestroy(encoder_upload_done_[s]);
    }
    for (PinnedSlot& slot : upload_slots_) {
        if (slot.host) cudaFreeHost(slot.host);
        if (slot.done) cudaEventDestroy(slot.done);
    }
    if (main_done_) cudaEventDestroy(main_done_);
    if (comm_done_) cudaEventDestroy(comm_done_);
    if (main_) cudaStreamDestroy(main_);
    if (comm_) cudaStreamDestroy(comm_);
}

int CudaBackend::available_devices() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

size_t CudaBackend::num_gemm_plans() const { return gemm_->num_plans(); }
std::string CudaBackend::gemm_choices() const { return gemm_->choices(); }
void CudaBackend::load_gemm_choices(const std::string& text) { gemm_->load_choices(text); }
size_t CudaBackend::num_gemm_timed() const { return gemm_->num_timed(); }
size_t CudaBackend::num_gemm_reused() const { return gemm_->num_reused(); }
size_t CudaBackend::num_gemm_declined() const { return gemm_->num_declined(); }
size_t CudaBackend::num_gemm_rejected() const { return gemm_->num_rejected(); }
void CudaBackend::set_gemm_timer(GemmTimer timer) { gemm_->set_timer(std::move(timer)); }

void* CudaBackend::scratch(Scratch& s, size_t bytes) {
    if (bytes <= s.bytes) return s.ptr;
    if (s.ptr) {
        CUDA_CHECK(cudaStreamSynchronize(main_));  // nothing in flight may still use the old buffer
        CUDA_CHECK(cudaFree(s.ptr));
        s.ptr = nullptr;
        s.bytes = 0;
    }
    CUDA_CHECK(cudaMalloc(&s.ptr, bytes));
    s.bytes = bytes;
    return s.ptr;
}

std::vector<BufferSize> CudaBackend::scratch_plan(size_t B, size_t T, size_t C, size_t NH, const BackendOptions&) {
    // The sizes the ops below request from scratch(): per training step of the model (llmc/model.h), layernorm
    // backward runs on (N, C), bias gradients on the widest biased layer (fc, OC = 4C), the encoder groups N tokens
    // into chunks (llmc/cuda/encoder_groups.h) and sums the chunks of frequent tokens in slots. Not Muon's workspace:
    // whether a step grows it depends on the optimizer, which this plan is not told.
    const size_t N = B * T;
    return {
        {"attention backward D", "B x NH x T, fp32", attention_rowdot_elems(B, T, NH), sizeof(float)},
        {"layernorm backward partials", "fp32", layernorm_backward_scratch_floats(N, C), sizeof(float)},
        {"bias gradient partials", "fp32, OC = 4C", bias_backward_scratch_floats(N, 4 * C), sizeof(float)},
        {"reduction partials", "fp32", kMaxReducePartials, sizeof(float)},
        {"encoder token grouping", "int32, 6N + 2", encoder_max_group_ints(N), sizeof(int)},
        {"encoder chunk partial sums", "fp32, (2N / chunk + 1) x C", encoder_max_slots(N) * C, sizeof(float)},
        {"cuBLASLt workspace", "bytes", GemmRunner::kWorkspaceBytes, 1},
    };
}

// ---- memory ------------------------------------------------------------------------------------------------------

void* CudaBackend::alloc(size_t bytes) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        fail("cudaMalloc of %zu bytes failed on device %d (%s; %zu of %zu bytes free)", bytes, device_,
             cudaGetErrorString(err), free_b, total_b);
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, main_));
    CUDA_CHECK(cudaStreamSynchronize(main_));  // zeroed before any stream (the comm stream too) can touch it
    return p;
}

void CudaBackend::free(void* p) {
    if (p && !unwinding()) CUDA_CHECK(cudaFree(p));  // unwinding: leaked on purpose, see ~CudaBackend
}

void CudaBackend::memset_zero(void* p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, main_));
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
    // Either way the caller may reuse host_src on return: the staged copy took it into a pinned slot, and from
    // pageable memory cudaMemcpyAsync returns once the source has been staged by the driver.
    if (bytes && bytes <= kStagedUploadBytes) staged_upload(dst, host_src, bytes);
    else if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, main_));
    if (dst == uploaded_tokens_dst_) uploaded_tokens_dst_ = nullptr;  // the kept host tokens no longer match it
}

void CudaBackend::staged_upload(void* dst, const void* host_src, size_t bytes) {
    PinnedSlot& slot = upload_slots_[next_upload_slot_];
    next_upload_slot_ = (next_upload_slot_ + 1) % kUploadSlots;
    if (slot.done) CUDA_CHECK(cudaEventSynchronize(slot.done));  // its previous copy has left the buffer
    else CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
    if (slot.bytes < bytes) {
        if (slot.host) CUDA_CHECK(cudaFreeHost(slot.host));
        slot.host = nullptr;
        slot.bytes = 0;
        const size_t grown = std::max(bytes, size_t(1) << 20);  // tokens at B*T = 65536 fit the first one
        CUDA_CHECK(cudaMallocHost(&slot.host, grown));
        slot.bytes = grown;
    }
    std::memcpy(slot.host, host_src, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, slot.host, bytes, cudaMemcpyHostToDevice, main_));
    CUDA_CHECK(cudaEventRecord(slot.done, main_));
}

void CudaBackend::upload_tokens(int* dst, const int* host_src, size_t n) {
    copy_to_device(dst, host_src, n * sizeof(int));
    uploaded_tokens_.assign(host_src, host_src + n);
    uploaded_tokens_dst_ = dst;
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, main_));
    CUDA_CHECK(cudaStreamSynchronize(main_));
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, main_));
}

void CudaBackend::upload_floats(act_t* dst, const float* host_src, size_t n) {
    std::vector<uint16_t> bits(n);
    for (size_t i = 0; i < n; i++) bits[i] = float_to_bf16(host_src[i]);
    if (n) CUDA_CHECK(cudaMemcpyAsync(dst, bits.data(), n * 2, cudaMemcpyHostToDevice, main_));
    CUDA_CHECK(cudaStreamSynchronize(main_));
}

void CudaBackend::download_floats(float* host_dst, const act_t* src, size_t n) {
    std::vector<uint16_t> bits(n);
    if (n) CUDA_CHECK(cudaMemcpyAsync(bits.data(), src, n * 2, cudaMemcpyDeviceToHost, main_));
    CUDA_CHECK(cudaStreamSynchronize(main_));
    for (size_t i = 0; i < n; i++) host_dst[i] = bf16_to_float(bits[i]);
}

void CudaBackend::floats_to_act(act_t* dst, const float* src, size_t n) {
    count_path(floats_to_bf16(dst, src, n, main_));
}
void CudaBackend::act_to_floats(float* dst, const act_t* src, size_t n) {
    count_path(bf16_to_floats(dst, src, n, main_));
}

void CudaBackend::synchronize() {
    CUDA_CHECK(cudaStreamSynchronize(main_));
    CUDA_CHECK(cudaStreamSynchronize(comm_));
}

void CudaBackend::comm_waits_main() {
    CUDA_CHECK(cudaEventRecord(main_done_, main_));
    CUDA_CHECK(cudaStreamWaitEvent(comm_, main_done_, 0));
}
void CudaBackend::main_waits_comm() {
    CUDA_CHECK(cudaEventRecord(comm_done_, comm_));
    CUDA_CHECK(cudaStreamWaitEvent(main_, comm_done_, 0));
}
// Ordering events only (no timing: cheaper to record and wait on).
Event CudaBackend::event_create() {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return Event(e);
}
void CudaBackend::event_destroy(Event event) {
    if (event.handle) cudaEventDestroy(cuda_event(event));  // never synchronises; errors at teardown are not reported
}
void CudaBackend::event_record(Event event, Stream stream) {
    CUDA_CHECK(cudaEventRecord(cuda_event(event), cuda_stream(stream)));
}
void CudaBackend::stream_wait_event(Stream stream, Event event) {
    CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(stream), cuda_event(event), 0));
}

// ---- forward -----------------------------------------------------------------------------------------------------

void CudaBackend::encoder_forward(act_t* out, const int* inp, const act_t* wte, const act_t* wpe, size_t B, size_t T,
                                  size_t C) {
    if (B * T * C != 0) count_path(llmc::encoder_forward(out, inp, wte, wpe, B, T, C, main_));
}

void CudaBackend::layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w,
                                    const act_t* b, size_t N, size_t C) {
    if (N && C) count_path(llmc::layernorm_forward(out, mean, rstd, inp, w, b, N, C, main_));
}

void CudaBackend::fused_residual_layernorm_forward(act_t* residual, act_t* out, float* mean, float* rstd,
                                                   const act_t* inp1, const act_t* inp2, const act_t* w,
                                                   const act_t* b, size_t N, size_t C) {
    if (N && C)
        count_path(llmc::fused_residual_layernorm_forward(residual, out, mean, rstd, inp1, inp2, w, b, N, C, main_));
}

void CudaBackend::matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias, size_t N, size_t C,
                                 size_t OC, act_t* pre_gelu) {
    if (N && OC) count_path(llmc::matmul_forward(*gemm_, out, inp, w, bias, N, C, OC, pre_gelu, main_));
}

void CudaBackend::gelu_forward(act_t* out, const act_t* inp, size_t n) {
    count_path(llmc::gelu_forward(out, inp, n, main_));
}

// The head size first (any device); then, if this process sees a GPU (the current device: the rank's once the backend
// exists, device 0 for --dry-run; none on a build machine), that its shared memory holds attention's kernels and the
// layernorm backward at this C: the model calls this when it is created, so a shape the GPU cannot run is refused at
// start-up, and only such a shape.
void CudaBackend::check_attention_shape(size_t C, size_t NH) {
    llmc::check_attention_shape(C, NH);
    int count = 0, device = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    const DeviceLimits d = read_device_limits(device);
    attention_kernels_or_fail(C / NH, d);
    check_layernorm_fits(C, d);
}

void CudaBackend::attention_forward(act_t* out, float* state, const act_t* qkv, size_t B, size_t T, size_t C,
                                    size_t NH) {
    if (B * T * C == 0) return;
    llmc::attention_forward(out, state, qkv, B, T, C, NH, attention_kernels_or_fail(C / NH, limits_), main_);
}

void CudaBackend::fused_classifier(act_t* logits, float* losses, const int* targets, float dloss, size_t N, size_t V,
                                   size_t Vp, bool write_dlogits) {
    count_path(
        llmc::fused_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, limits_, sm_count_, main_));
}

// ---- backward ----------------------------------------------------------------------------------------------------

void CudaBackend::matmul_backward(act_t* dinp, float* dweight, float* dbias, act_t* dout, const act_t* inp,
                                  const act_t* w, size_t N, size_t C, size_t OC, const act_t* pre_gelu,
                                  const act_t* dinp_pre_gelu) {
    if (N == 0 || OC == 0 || C == 0) return;
    float* partials = dbias ? (float*)scratch(bias_partials_, bias_backward_scratch_floats(N, OC) * sizeof(float))
                            : nullptr;
    count_path(llmc::matmul_backward(*gemm_, dinp, dweight, dbias, partials, dout, inp, w, N, C, OC, pre_gelu,
                                     dinp_pre_gelu, main_));
}

void CudaBackend::layernorm_backward(act_t* dinp, float* dweight, float* dbias, const act_t* dout, const act_t* inp,
                                     const act_t* w, const float* mean, const float* rstd, size_t N, size_t C) {
    if (N == 0 || C == 0) return;
    float* partials = (float*)scratch(layernorm_partials_, layernorm_backward_scratch_floats(N, C) * sizeof(float));
    count_path(llmc::layernorm_backward(dinp, dweight, dbias, partials, dout, inp, w, mean, rstd, N, C, limits_, main_));
}

void CudaBackend::attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out,
                                     const float* state, size_t B, size_t T, size_t C, size_t NH) {
    if (B * T * C == 0) return;
    float* rowdot = (float*)scratch(attention_rowdot_, attention_rowdot_elems(B, T, NH) * sizeof(float));
    llmc::attention_backward(dqkv, rowdot, dout, qkv, out, state, B, T, C, NH,
                             attention_kernels_or_fail(C / NH, limits_), main_);
}

void CudaBackend::encoder_backward(float* dwte, float* dwpe, const act_t* dout, const int* inp, size_t B, size_t T,
                                   size_t C) {
    const size_t N = B * T;
    if (N == 0 || C == 0) return;
    const bool vec_wpe = encoder_backward_wpe(dwpe, dout, B, T, C, main_);
    // The model's path: the host still has the tokens it uploaded, so grouping them needs no synchronisation and
    // runs while the device works through the earlier layers' backward. Used once per upload.
    const bool uploaded = inp == uploaded_tokens_dst_ && uploaded_tokens_.size() == N;
    uploaded_tokens_dst_ = nullptr;
    const EncoderGroupSizes s = uploaded ? group_uploaded_tokens(N) : group_device_tokens(inp, N);
    count_path(encoder_backward_grouped(dwte, dout, s, C) && vec_wpe);
}

EncoderGroupSizes CudaBackend::group_device_tokens(const int* inp, size_t N) {
    // Fetching the tokens waits for the stream, which also guarantees that the previous call's upload from
    // encoder_groups_host_ has finished before the buffer is rewritten.
    const size_t packed_max = encoder_max_group_ints(N);
    if (encoder_host_ints_ < packed_max) {
        CUDA_CHECK(cudaStreamSynchronize(main_));
        if (encoder_tokens_host_) CUDA_CHECK(cudaFreeHost(encoder_tokens_host_));
        if (encoder_groups_host_) CUDA_CHECK(cudaFreeHost(encoder_groups_host_));
        encoder_tokens_host_ = encoder_groups_host_ = nullptr;
        encoder_host_ints_ = 0;
        CUDA_CHECK(cudaMallocHost((void**)&encoder_tokens_host_, packed_max * sizeof(int)));
        CUDA_CHECK(cudaMallocHost((void**)&encoder_groups_host_, packed_max * sizeof(int)));
        encoder_host_ints_ = packed_max;
    }
    CUDA_CHECK(cudaMemcpyAsync(encoder_tokens_host_, inp, N * sizeof(int), cudaMemcpyDeviceToHost, main_));
    CUDA_CHECK(cudaStreamSynchronize(main_));
    const EncoderGroupSizes s = group_tokens(encoder_groups_host_, encoder_tokens_host_, N);
    int* groups = (int*)scratch(encoder_groups_, packed_max * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(groups, encoder_groups_host_, s.ints() * sizeof(int), cudaMemcpyHostToDevice, main_));
    return s;
}

bool CudaBackend::encoder_backward_grouped(float* dwte, const act_t* dout, const EncoderGroupSizes& s, size_t C) {
    // Sized for the worst case of this batch size, so a later batch with more frequent tokens does not regrow it.
    float* slots = (float*)scratch(encoder_slots_, encoder_max_slots(s.N) * C * sizeof(float));
    return encoder_backward_wte(dwte, slots, dout, (const int*)encoder_groups_.ptr, s, C, main_);
}

EncoderGroupSizes CudaBackend::group_uploaded_tokens(size_t N) {
    const size_t packed_max = encoder_max_group_ints(N);
    if (encoder_prepared_ints_ < packed_max) {  // grow both slots (rare: the first call, or a larger batch)
        CUDA_CHECK(cudaStreamSynchronize(main_));
        for (int s = 0; s < 2; s++) {
            if (encoder_prepared_host_[s]) CUDA_CHECK(cudaFreeHost(encoder_prepared_host_[s]));
            encoder_prepared_host_[s] = nullptr;
            if (!encoder_upload_done_[s])
                CUDA_CHECK(cudaEventCreateWithFlags(&encoder_upload_done_[s], cudaEventDisableTiming));
        }
        encoder_prepared_ints_ = 0;
        for (int s = 0; s < 2; s++)
            CUDA_CHECK(cudaMallocHost((void**)&encoder_prepared_host_[s], packed_max * sizeof(int)));
        encoder_prepared_ints_ = packed_max;
        CUDA_CHECK(cudaEventRecord(encoder_upload_done_[0], main_));
        CUDA_CHECK(cudaEventRecord(encoder_upload_done_[1], main_));
    }
    // The slot's previous upload (two calls ago) must have left the pinned buffer before it is rewritten; the
    // device is normally far past it, so this does not wait.
    const int slot = encoder_slot_;
    CUDA_CHECK(cudaEventSynchronize(encoder_upload_done_[slot]));
    int* host = encoder_prepared_host_[slot];
    const EncoderGroupSizes s = group_tokens(host, uploaded_tokens_.data(), N);
    // Stream order puts this upload after the previous backward (which read encoder_groups_) and before this
    // backward's dwte kernels.
    int* groups = (int*)scratch(encoder_groups_, packed_max * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(groups, host, s.ints() * sizeof(int), cudaMemcpyHostToDevice, main_));
    CUDA_CHECK(cudaEventRecord(encoder_upload_done_[slot], main_));
    encoder_slot_ ^= 1;
    return s;
}

EncoderGroupSizes CudaBackend::group_tokens(int* packed, const int* tokens, size_t N) {
    int max_token = 0;
    for (size_t n = 0; n < N; n++) max_token = std::max(max_token, tokens[n]);
    if ((size_t)max_token + 1 > encoder_count_.size()) {
        encoder_count_.assign((size_t)max_token + 1, 0);
        encoder_next_.assign((size_t)max_token + 1, 0);
    }
    return encoder_group_positions(packed, tokens, N, encoder_count_.data(), encoder_next_.data(),
                                   encoder_count_.size());
}

// ---- reductions and the optimizer ----------------------------------------------------------------------------------

void CudaBackend::sum_into(float* acc, const float* x, size_t n, float scale) {
    count_path(reduce_into<false>(acc, x, n, scale, (float*)reduce_partials_.ptr, main_));
}

void CudaBackend::norm_squared_into(float* acc, const float* g, size_t n) {
    count_path(reduce_into<true>(acc, g, n, 1.0f, (float*)reduce_partials_.ptr, main_));
}

void CudaBackend::add_into(float* dst, const float* src, size_t n) { count_path(llmc::add_into(dst, src, n, main_)); }
void CudaBackend::grads_to_bf16(void* dst, const float* src, size_t n, Stream stream) {
    count_path(llmc::floats_to_bf16(static_cast<bf16*>(dst), src, n, cuda_stream(stream)));
}
void CudaBackend::grads_from_bf16(float* dst, const void* src, size_t n, Stream stream) {
    count_path(llmc::bf16_to_floats(dst, static_cast<const bf16*>(src), n, cuda_stream(stream)));
}

void CudaBackend::adamw_update(act_t* params, float* master, const float* grads, float* m, float* v, size_t n,
                               float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                               int t, uint32_t seed, size_t seed_offset) {
    count_path(llmc::adamw_update(params, master, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t,
                                  seed, seed_offset, main_));
}

// ---- the speedrun recipe's ops ------------------------------------------------------------------------------------

void CudaBackend::rmsnorm_forward(act_t* out, float* rstd, const act_t* inp, size_t N, size_t C) {
    if (N && C) count_path(speedrun::rmsnorm_forward(out, rstd, inp, N, C, main_));
}

void CudaBackend::fused_residual_rmsnorm_forward(act_t* residual, act_t* out, float* rstd, const act_t* inp1,
                                                 const act_t* inp2, size_t N, size_t C) {
    if (N && C) count_path(speedrun::fused_residual_rmsnorm_forward(residual, out, rstd, inp1, inp2, N, C, main_));
}

void CudaBackend::rmsnorm_backward(act_t* dinp, const act_t* dout, const act_t* inp, const float* rstd, size_t N,
                                   size_t C) {
    if (N && C) count_path(speedrun::rmsnorm_backward(dinp, dout, inp, rstd, N, C, main_));
}

void CudaBackend::qk_norm_rotary_forward(act_t* qkv, float* rstd, const float* table, size_t B, size_t T, size_t C,
                                         size_t NH) {
    if (B * T * C != 0) count_path(speedrun::qk_norm_rotary_forward(qkv, rstd, table, B, T, C, NH, main_));
}

void CudaBackend::qk_norm_rotary_backward(act_t* dqkv, const act_t* qkv, const float* rstd, const float* table,
                                          size_t B, size_t T, size_t C, size_t NH) {
    if (B * T * C != 0) count_path(speedrun::qk_norm_rotary_backward(dqkv, qkv, rstd, table, B, T, C, NH, main_));
}

void CudaBackend::relu2_forward(act_t* out, const act_t* inp, size_t n) {
    count_path(speedrun::relu2_forward(out, inp, n, main_));
}

void CudaBackend::relu2_backward_inplace(act_t* dout, const act_t* pre, size_t n) {
    count_path(speedrun::relu2_backward_inplace(dout, pre, n, main_));
}

// cap 0 is the plain classifier (llmc/backend.h); the soft-capped kernels refuse it.
void CudaBackend::softcap_classifier(act_t* logits, float* losses, const int* targets, float dloss, size_t N,
                                     size_t V, size_t Vp, bool write_dlogits, float cap) {
    if (cap == 0.0f) return fused_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits);
    count_path(speedrun::softcap_classifier(logits, losses, targets, dloss, N, V, Vp, write_dlogits, cap, limits_,
                                            sm_count_, main_));
}

void CudaBackend::muon_update(act_t* params, float* master, const float* grads, float* momentum, size_t rows,
                              size_t cols, float lr, float mu, bool nesterov, float grad_scale, uint32_t seed,
                              size_t seed_offset) {
    if (rows * cols == 0) return;
    void* workspace = scratch(muon_workspace_, speedrun::muon_workspace_bytes(rows, cols));
    count_path(speedrun::muon_update(*gemm_, params, master, grads, momentum, rows, cols, lr, mu, nesterov,
                                     grad_scale, seed, seed_offset, workspace, main_));
}

// The partials are the reduction's (allocated with the backend): ops on one stream never share them at once.
void CudaBackend::embed_skip_forward(act_t* out, const act_t* x, const act_t* x0, const act_t* l0, const act_t* l1,
                                     size_t n) {
    count_path(speedrun::embed_skip_forward(out, x, x0, l0, l1, n, main_));
}

void CudaBackend::embed_skip_backward(act_t* dx, act_t* dx0, float* dl0, float* dl1, const act_t* dout,
                                      const act_t* x, const act_t* x0, const act_t* l0, const act_t* l1, size_t n) {
    count_path(speedrun::embed_skip_backward(dx, dx0, dl0, dl1, dout, x, x0, l0, l1, n, (float*)reduce_partials_.ptr,
                                             main_));
}

void CudaBackend::value_residual_forward(act_t* qkv, act_t* v_pre, const act_t* qkv1, const act_t* lam, size_t N,
                                         size_t C) {
    count_path(speedrun::value_residual_forward(qkv, v_pre, qkv1, lam, N, C, main_));
}

void CudaBackend::value_residual_backward(act_t* dqkv, float* dv1, float* dlam, const act_t* v_pre,
                                          const act_t* qkv1, const act_t* lam, size_t N, size_t C) {
    count_path(speedrun::value_residual_backward(dqkv, dv1, dlam, v_pre, qkv1, lam, N, C,
                                                 (float*)reduce_partials_.ptr, main_));
}

void CudaBackend::value_residual_add(act_t* dqkv, const float* dv1, size_t N, size_t C) {
    count_path(speedrun::value_residual_add(dqkv, dv1, N, C, main_));
}

}  // namespace llmc
