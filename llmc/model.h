// GPT-2, written once over a backend (llmc/backend.h: the ops and their semantics).
//
// The model owns three kinds of device memory:
//   params   act_t, flat, ParamLayout order (llmc/layout.h), padded to padded_params() elements (zeros past the end)
//   grads    float, same layout and length; accumulated with += over micro-steps, zeroed by the optimizer. Not
//            allocated with ModelOptions::gradient_buffer = false (ZeRO 2): backward then accumulates each gradient
//            bucket into the buffer its hooks hand out (BackwardHooks, llmc/optimizer.h)
//   acts     the activations of one forward pass at the (B, T) it was created for, kept for backward
// Forward reads top to bottom, one op per line with its shapes. N = B*T rows throughout.
//
// Residual stream: layer l reads res_in (= encoded for l = 0, else layer l-1's res3) and writes
//   res2 = res_in + attproj(attention(ln1(res_in)))         (fused with ln2: ln2 = layernorm(res2))
//   res3 = res2 + fcproj(gelu(fc(ln2)))                     (fused with the next layer's ln1, or with lnf)
// so layer l's ln1 is computed by layer l-1 (or by a plain layernorm of the encoding for l = 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "config.h"
#include "error.h"
#include "gpt2_params.h"
#include "layout.h"
#include "rng.h"
#include "zero.h"

namespace llmc {

struct ModelOptions {
    size_t pad_to = 1;            // padded_params() is a multiple of this (ZeRO shards: world size x alignment)
    // -r 1: keep only the pre-GELU activations, recompute gelu(fch) in backward. The forward is the same as -r 0. The
    // recomputed gelu(fch) is the CPU backend's forward value bit for bit; on the CUDA backend the forward's fused
    // GELU_AUX epilogue takes GELU of the fp32 accumulator while the recompute takes it of the stored bf16 fch, so an
    // element may differ by at most 1.01 U (|g0| + |g1| + 1.13 |fch|) + 2^-20 (1 + |fch|^3), U = 2^-8 (bf16's unit
    // roundoff; test/sim/test_kernels.cpp checks exactly this), and bit for bit where the forward is not fused (4C
    // not a multiple of 8). That value feeds only fcproj's weight gradient.
    bool recompute_gelu = false;
    // -r 2: also keep only the layernorms' inputs and statistics, recompute ln1 and ln2 in backward (one (N, C)
    // buffer each instead of L). The layernorm recomputation repeats the forward's exact ops on the same inputs:
    // bit-identical.
    bool recompute_layernorm = false;
    // The full fp32 gradient buffer (grads()). ZeRO 2 turns it off: its optimizer hands backward one bucket buffer
    // at a time (BackwardHooks::bucket_buffer), so no rank holds the whole gradient.
    bool gradient_buffer = true;
    // Rows per chunk of the classifier (lm_head GEMM, softmax cross-entropy, dlogits, lm_head backward GEMMs): the
    // logits buffer holds one chunk, never the whole (N, Vp). The model uses max(this, T) rows (a forward of one
    // sequence without targets, as sampling does, keeps all its logits), at most N.
    size_t classifier_chunk_rows = 4096;
};

// The model's device buffers besides the parameters and gradients, in allocation order. GPT2::activation_plan()
// gives their sizes; the model allocates exactly these, and the trainer's --dry-run prints them (llmc/memory_plan.h):
// one table, so the printed plan cannot drift from what is allocated.
enum ActBuffer {
    ACT_INPUTS, ACT_TARGETS, ACT_ENCODED, ACT_LN1, ACT_LN1_MEAN, ACT_LN1_RSTD, ACT_QKV, ACT_ATTY, ACT_ATT_STATE,
    ACT_RES2, ACT_LN2, ACT_LN2_MEAN, ACT_LN2_RSTD, ACT_FCH, ACT_FCH_GELU, ACT_BRANCH, ACT_RES3, ACT_LNF, ACT_LNF_MEAN,
    ACT_LNF_RSTD, ACT_LOGITS, ACT_LOSSES, GRAD_RESIDUAL, GRAD_C, GRAD_3C, GRAD_4C, GRAD_WTE_CLASSIFIER,
    NUM_ACT_BUFFERS
};

template <class Backend>
class GPT2 {
public:
    using act_t = typename Backend::act_t;

    GPT2(Backend& be, const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt = ModelOptions())
        : be_(be), cfg_(cfg), layout_(cfg), B_(B), T_(T), opt_(opt), chunk_rows_(classifier_rows(B, T, opt)) {
        check_shape(cfg, B, T, opt);
        padded_ = padded_params(layout_, opt);
        params_ = (act_t*)be_.alloc(padded_ * sizeof(act_t));
        if (opt.gradient_buffer) grads_ = (float*)be_.alloc(padded_ * sizeof(float));
        for (size_t b = 0; b < num_grad_buckets(layout_); b++) bucket_ranges_.push_back(bucket_ranges(layout_, b));
        allocate_activations();
    }
    ~GPT2() {
        for (void* p : owned_) be_.free(p);
        be_.free(params_);
        if (grads_) be_.free(grads_);
    }
    GPT2(const GPT2&) = delete;
    GPT2& operator=(const GPT2&) = delete;

    Backend& backend() { return be_; }
    const ModelConfig& config() const { return cfg_; }
    const ParamLayout& layout() const { return layout_; }
    size_t num_params() const { return layout_.total; }
    size_t padded_params() const { return padded_; }
    size_t max_batch() const { return B_; }
    size_t max_seq_len() const { return T_; }
    act_t* params() { return params_; }
    float* grads() { return grads_; }  // nullptr without a gradient buffer (ModelOptions::gradient_buffer)
    bool has_gradient_buffer() const { return grads_ != nullptr; }
    ParamViews<act_t> param_views() { return ParamViews<act_t>(params_, layout_); }

    // Host fp32 values in ParamLayout order (num_params() of them) -> the device parameters.
    void set_params(const std::vector<float>& host) {
        if (host.size() != layout_.total)
            fail("parameter count %zu does not match the model's %zu (%s)", host.size(), layout_.total,
                 cfg_.describe().c_str());
        be_.upload_floats(params_, host.data(), host.size());
    }
    std::vector<float> get_params() {
        std::vector<float> host(layout_.total);
        be_.download_floats(host.data(), params_, host.size());
        return host;
    }
    // The fp32 values of parameters [begin, end) only: a rank writing its checkpoint shard needs no whole copy.
    std::vector<float> get_params(size_t begin, size_t end) {
        if (begin > end || end > layout_.total)
            fail("get_params: range [%zu, %zu) is outside the model's %zu parameters", begin, end, layout_.total);
        std::vector<float> host(end - begin);
        be_.download_floats(host.data(), params_ + begin, host.size());
        return host;
    }
    std::vector<float> get_grads() {
        require_gradient_buffer("get_grads");
        std::vector<float> host(layout_.total);
        be_.copy_to_host(host.data(), grads_, host.size() * sizeof(float));
        return host;
    }

    // The initialisation of the parameter table (ParamSpec::init), deterministic from `seed`: each tensor draws from
    // its own stream (seed, tensor index), so the values do not depend on the order tensors are initialised in.
    void init_gpt2(uint64_t seed) {
        std::vector<float> host(layout_.total, 0.0f);
        for (int t = 0; t < layout_.num_tensors(); t++) {
            const ParamInit& init = layout_.spec(t).init;
            float* dst = host.data() + layout_.offsets[(size_t)t];
            const size_t size = layout_.sizes[(size_t)t];
            const size_t n = init.rows ? init.rows * (size / layout_.spec(t).shape[0]) : size;
            if (init.kind == ParamInit::Ones) std::fill(dst, dst + n, 1.0f);
            if (init.kind != ParamInit::Normal) continue;
            NormalRng rng(seed, (uint64_t)t);
            for (size_t i = 0; i < n; i++) dst[i] = init.std * rng.next();
        }
        set_params(host);
    }

    void zero_grads() {
        require_gradient_buffer("zero_grads");
        be_.memset_zero(grads_, padded_ * sizeof(float));
    }

    // Forward over inputs/targets (host, B*T token ids each; B <= max_batch(), T <= max_seq_len()).
    // targets == nullptr: logits only (B*T rows at most max(classifier_chunk_rows, T)). With targets, per-position
    // losses are computed and mean_loss() returns their mean. grad_scale > 0 prepares backward(): the classifier
    // turns each chunk's logits into d(grad_scale * mean loss)/dlogits and runs the lm_head backward on them at once
    // (classifier_forward). Training passes grad_scale = 1: each micro-batch's gradient is that of its
    // own mean loss whatever the number of micro-steps or ranks, and the optimizer divides the accumulated, reduced
    // sums by (micro-steps x ranks) in fp32 (llmc/optimizer.h, "World-size independence").
    void forward(const int* inputs, const int* targets, size_t B, size_t T, float grad_scale = 0.0f) {
        if (B > B_ || T > T_ || B == 0 || T == 0)
            fail("forward: batch %zux%zu does not fit the model's activations %zux%zu", B, T, B_, T_);
        const size_t C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers, N = B * T;
        if (!targets && N > chunk_rows_)
            fail("forward without targets keeps the logits of at most %zu rows (ModelOptions::classifier_chunk_rows), "
                 "got B*T = %zu", chunk_rows_, N);
        for (size_t i = 0; i < N; i++) check_token(inputs[i], "input");
        be_.upload_tokens(inputs_, inputs, N);
        has_targets_ = targets != nullptr;
        if (targets) {
            for (size_t i = 0; i < N; i++) check_token(targets[i], "target");
            be_.copy_to_device(targets_, targets, N * sizeof(int));
        }
        cur_B_ = B, cur_T_ = T, grad_scale_ = grad_scale;

        ParamViews<act_t> p = param_views();
        be_.encoder_forward(a_.encoded, inputs_, p.wte(), p.wpe(), B, T, C);              // (B,T,C)
        be_.layernorm_forward(a_.ln1, a_.ln1_mean, a_.ln1_rstd, a_.encoded,              // (B,T,C)
                              p.layer(0).ln1w, p.layer(0).ln1b, N, C);
        for (size_t l = 0; l < L; l++) {
            LayerParams<act_t> w = p.layer(l);
            LayerActs a = layer_acts(l);
            const act_t* res_in = l == 0 ? a_.encoded : layer_acts(l - 1).res3;
            be_.matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, N, C, 3 * C);              // (B,T,3C)
            be_.attention_forward(a.atty, a.att_state, a.qkv, B, T, C, NH);              // (B,T,C) + state
            be_.matmul_forward(a_.branch, a.atty, w.attprojw, w.attprojb, N, C, C);      // (B,T,C)
            be_.fused_residual_layernorm_forward(a.res2, a.ln2, a.ln2_mean, a.ln2_rstd,  // (B,T,C) x2
                                                 res_in, a_.branch, w.ln2w, w.ln2b, N, C);
            be_.matmul_forward(a.fch_gelu, a.ln2, w.fcw, w.fcb, N, C, 4 * C, a.fch);     // (B,T,4C) x2
            be_.matmul_forward(a_.branch, a.fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C); // (B,T,C)
            // res3 = res2 + fcproj, normalised by the next layer's ln1 or by the final layernorm.
            bool last = l + 1 == L;
            LayerActs next = last ? a : layer_acts(l + 1);
            be_.fused_residual_layernorm_forward(a.res3, last ? a_.lnf : next.ln1,
                                                 last ? a_.lnf_mean : next.ln1_mean,
                                                 last ? a_.lnf_rstd : next.ln1_rstd, a.res2, a_.branch,
                                                 last ? p.lnfw() : p.layer(l + 1).ln1w,
                                                 last ? p.lnfb() : p.layer(l + 1).ln1b, N, C);
        }
        classifier_forward(N, targets != nullptr, grad_scale);                           // (B,T) losses
    }

    // Mean of the per-position losses of the last forward (synchronises with the device).
    float mean_loss() {
        if (!has_targets_) fail("mean_loss: the last forward had no targets");
        size_t N = cur_B_ * cur_T_;
        std::vector<float> losses(N);
        be_.copy_to_host(losses.data(), a_.losses, N * sizeof(float));
        double sum = 0;
        for (float x : losses) sum += x;
        return (float)(sum / (double)N);
    }
    // The per-position losses of the last forward (B*T floats; synchronises). For evaluations that need single
    // positions (HellaSwag scores only the completion tokens).
    std::vector<float> get_losses() {
        if (!has_targets_) fail("get_losses: the last forward had no targets");
        std::vector<float> losses(cur_B_ * cur_T_);
        be_.copy_to_host(losses.data(), a_.losses, losses.size() * sizeof(float));
        return losses;
    }
    // Adds scale * sum(losses of the last forward) into a device float (no host synchronisation).
    void accumulate_loss(float* device_acc, float scale) {
        if (!has_targets_) fail("accumulate_loss: the last forward had no targets");
        be_.sum_into(device_acc, a_.losses, cur_B_ * cur_T_, scale);
    }
    // The logits of the last forward, (B, T, Vp) as floats; only valid when that forward had grad_scale == 0 and
    // one classifier chunk (B*T <= max(classifier_chunk_rows, T)).
    std::vector<float> get_logits() {
        require_logits("get_logits");
        size_t n = cur_B_ * cur_T_ * cfg_.padded_vocab_size;
        std::vector<float> host(n);
        be_.download_floats(host.data(), a_.logits, n);
        return host;
    }
    // Logits of one position (b, t) of the last forward: Vp floats.
    std::vector<float> get_logits_row(size_t b, size_t t) {
        require_logits("get_logits_row");
        if (b >= cur_B_ || t >= cur_T_)
            fail("get_logits_row: (%zu, %zu) is outside the last batch %zux%zu", b, t, cur_B_, cur_T_);
        const size_t Vp = cfg_.padded_vocab_size;
        std::vector<float> host(Vp);
        be_.download_floats(host.data(), a_.logits + (b * cur_T_ + t) * Vp, Vp);
        return host;
    }

    // grads += d(grad_scale * mean loss)/dparams for the last forward (which must have had targets and grad_scale > 0),
    // bucket by bucket into the model's buffer or the hooks' bucket buffers (BackwardHooks), announcing each bucket
    // to hooks.bucket_ready once the ops that complete it are enqueued.
    void backward(const BackwardHooks& hooks = BackwardHooks()) {
        if (!has_targets_ || !(grad_scale_ > 0.0f)) fail("backward: the last forward had no targets or grad_scale 0");
        const size_t B = cur_B_, T = cur_T_, N = B * T;
        const size_t C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers, Vp = cfg_.padded_vocab_size;
        const ParamViews<act_t> p = param_views();

        // Bucket L: the classifier adds wte's first part, the final layernorm lnfw and lnfb; the encoder, last, the
        // rest of wte and wpe. The classifier (in forward) left dL/dlnf in d_.buf_c and its wte gradient in
        // d_.wte_classifier; lnf = layernorm(res3 of the last layer).
        const BucketGrads gL = bucket_grads(L, hooks);
        float* dwte = gL.at(layout_.offsets[WTE]);
        be_.add_into(dwte, d_.wte_classifier, Vp * C);
        be_.memset_zero(d_.residual, N * C * sizeof(act_t));
        be_.layernorm_backward(d_.residual, gL.at(layout_.offsets[LNFW]), gL.at(layout_.offsets[LNFB]), d_.buf_c,
                               layer_acts(L - 1).res3, p.lnfw(), a_.lnf_mean, a_.lnf_rstd, N, C);
        // d_.residual now holds dL/d(res3 of layer L-1); each layer turns it into dL/d(its res_in).
        for (size_t l = L; l-- > 0;) {
            LayerParams<act_t> w = p.layer(l);
            const BucketGrads gl = bucket_grads(l, hooks);
            LayerParams<float> gw = layer_slices<float>(layout_, l, [&](size_t flat) { return gl.at(flat); });
            LayerActs a = layer_acts(l);
            const act_t* res_in = l == 0 ? a_.encoded : layer_acts(l - 1).res3;
            if (opt_.recompute_gelu) be_.gelu_forward(a.fch_gelu, a.fch, N * 4 * C);
            if (opt_.recompute_layernorm)
                be_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2w, w.ln2b, N, C);
            // MLP: res3 = res2 + fcproj(gelu(fc(ln2(res2))))
            // fcproj's input is gelu(fch): its dinp is written as the gradient with respect to fch (dinp_pre_gelu)
            be_.matmul_backward(d_.buf_4c, gw.fcprojw, gw.fcprojb, d_.residual, a.fch_gelu, w.fcprojw, N, 4 * C, C,
                                nullptr, a.fch);
            be_.matmul_backward(d_.buf_c, gw.fcw, gw.fcb, d_.buf_4c, a.ln2, w.fcw, N, C, 4 * C);
            be_.layernorm_backward(d_.residual, gw.ln2w, gw.ln2b, d_.buf_c, a.res2, w.ln2w, a.ln2_mean, a.ln2_rstd,
                                   N, C);
            // Attention: res2 = res_in + attproj(attention(qkv(ln1(res_in))))
            be_.matmul_backward(d_.buf_c, gw.attprojw, gw.attprojb, d_.residual, a.atty, w.attprojw, N, C, C);
            // d_.buf_4c (d fch) is dead from here to the next layer's MLP backward: the attention's workspace
            be_.attention_backward(d_.buf_3c, d_.buf_c, a.qkv, a.atty, a.att_state, B, T, C, NH, d_.buf_4c,
                                   grad_4c_bytes_);
            if (opt_.recompute_layernorm)
                be_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, res_in, w.ln1w, w.ln1b, N, C);
            be_.matmul_backward(d_.buf_c, gw.qkvw, gw.qkvb, d_.buf_3c, a.ln1, w.qkvw, N, C, 3 * C);
            be_.layernorm_backward(d_.residual, gw.ln1w, gw.ln1b, d_.buf_c, res_in, w.ln1w, a.ln1_mean, a.ln1_rstd,
                                   N, C);
            if (hooks.bucket_ready) hooks.bucket_ready(l);  // layer l's 12 gradient slices are complete
        }
        be_.encoder_backward(dwte, gL.at(layout_.offsets[WPE]), d_.residual, inputs_, B, T, C);
        if (hooks.bucket_ready) hooks.bucket_ready(L);  // wte (classifier + encoder), wpe, lnfw, lnfb
    }

    // Bytes of device memory held by the model (parameters, gradients, activations).
    size_t memory_bytes() const { return memory_bytes_; }

    // Fails with a message unless a model of this shape can be created (the backend's attention included).
    static void check_shape(const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt) {
        validate_config(cfg);
        if (B == 0 || T == 0) fail("batch size B=%zu and sequence length T=%zu must be positive", B, T);
        if (T > cfg.max_seq_len)
            fail("sequence length T=%zu is longer than the model's maximum %zu (maxT)", T, cfg.max_seq_len);
        if (opt.pad_to == 0) fail("ModelOptions::pad_to must be positive");
        if (opt.classifier_chunk_rows == 0) fail("ModelOptions::classifier_chunk_rows must be positive");
        Backend::check_attention_shape(cfg.channels, cfg.num_heads);
    }
    // Elements of the flat parameter and gradient buffers: the parameter count padded to a multiple of opt.pad_to.
    static size_t padded_params(const ParamLayout& layout, const ModelOptions& opt) {
        return (layout.total + opt.pad_to - 1) / opt.pad_to * opt.pad_to;
    }
    // Rows of one classifier chunk (the logits buffer): max(classifier_chunk_rows, T), at most B*T.
    static size_t classifier_rows(size_t B, size_t T, const ModelOptions& opt) {
        const size_t rows = opt.classifier_chunk_rows > T ? opt.classifier_chunk_rows : T;
        return rows < B * T ? rows : B * T;
    }
    // The activation buffers a model of this shape allocates (indexed by ActBuffer), without allocating anything.
    static std::vector<BufferSize> activation_plan(const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt) {
        check_shape(cfg, B, T, opt);
        const size_t N = B * T, C = cfg.channels, L = cfg.num_layers, NH = cfg.num_heads;
        const size_t A = sizeof(act_t), F = sizeof(float), I = sizeof(int);
        const size_t ln_layers = opt.recompute_layernorm ? 1 : L;  // -r 2: one buffer serves every layer
        const size_t gelu_layers = opt.recompute_gelu ? 1 : L;     // -r >= 1: likewise for gelu(fch)
        const std::string ln_shape = opt.recompute_layernorm ? "N x C (-r 2)" : "L x N x C";
        std::vector<BufferSize> p(NUM_ACT_BUFFERS);
        p[ACT_INPUTS] = {"input tokens", "N", N, I};
        p[ACT_TARGETS] = {"target tokens", "N", N, I};
        p[ACT_ENCODED] = {"encoded", "N x C", N * C, A};
        p[ACT_LN1] = {"ln1", ln_shape, ln_layers * N * C, A};
        p[ACT_LN1_MEAN] = {"ln1 mean", "L x N", L * N, F};
        p[ACT_LN1_RSTD] = {"ln1 rstd", "L x N", L * N, F};
        p[ACT_QKV] = {"qkv", "L x N x 3C", L * N * 3 * C, A};
        p[ACT_ATTY] = {"attention out", "L x N x C", L * N * C, A};
        p[ACT_ATT_STATE] = {"attention state", std::string("L x ") + Backend::attention_state_shape,
                            L * Backend::attention_state_elems(B, T, NH), F};
        p[ACT_RES2] = {"residual 2", "L x N x C", L * N * C, A};
        p[ACT_LN2] = {"ln2", ln_shape, ln_layers * N * C, A};
        p[ACT_LN2_MEAN] = {"ln2 mean", "L x N", L * N, F};
        p[ACT_LN2_RSTD] = {"ln2 rstd", "L x N", L * N, F};
        p[ACT_FCH] = {"fch (pre-GELU)", "L x N x 4C", L * N * 4 * C, A};
        p[ACT_FCH_GELU] = {"gelu(fch)", opt.recompute_gelu ? "N x 4C (-r >= 1)" : "L x N x 4C",
                           gelu_layers * N * 4 * C, A};
        p[ACT_BRANCH] = {"residual branch out", "N x C", N * C, A};
        p[ACT_RES3] = {"residual 3", "L x N x C", L * N * C, A};
        p[ACT_LNF] = {"lnf", "N x C", N * C, A};
        p[ACT_LNF_MEAN] = {"lnf mean", "N", N, F};
        p[ACT_LNF_RSTD] = {"lnf rstd", "N", N, F};
        p[ACT_LOGITS] = {"logits (one chunk)", "min(N, max(chunk, T)) x Vp",
                         classifier_rows(B, T, opt) * cfg.padded_vocab_size, A};
        p[ACT_LOSSES] = {"losses", "N", N, F};
        p[GRAD_RESIDUAL] = {"d residual", "N x C", N * C, A};
        p[GRAD_C] = {"d (N, C)", "N x C", N * C, A};
        p[GRAD_3C] = {"d qkv", "N x 3C", N * 3 * C, A};
        // d fch doubles as the attention backward's workspace (its dS, docs/cuda.md), which needs at least one head
        const size_t att_ws = (Backend::attention_backward_min_workspace(T) + A - 1) / A;
        p[GRAD_4C] = {"d fch, attention workspace", "max(N x 4C, one head's dS)",
                      N * 4 * C > att_ws ? N * 4 * C : att_ws, A};
        p[GRAD_WTE_CLASSIFIER] = {"d wte (classifier)", "Vp x C, fp32", cfg.padded_vocab_size * C, F};
        return p;
    }

private:
    // Where backward accumulates one bucket: a packed bucket buffer (ranges != nullptr) or the flat buffer.
    struct BucketGrads {
        float* base;
        const std::vector<FlatRange>* ranges;
        float* at(size_t flat) const { return ranges ? base + packed_offset(*ranges, flat) : base + flat; }
    };
    BucketGrads bucket_grads(size_t bucket, const BackwardHooks& hooks) const {
        if (float* packed = hooks.bucket_buffer ? hooks.bucket_buffer(bucket) : nullptr)
            return BucketGrads{packed, &bucket_ranges_[bucket]};
        if (!grads_)
            fail("backward: the model has no gradient buffer (ModelOptions::gradient_buffer = false, ZeRO 2) and the "
                 "hooks gave none for bucket %zu",
                 bucket);
        return BucketGrads{grads_, nullptr};
    }
    void require_gradient_buffer(const char* what) const {
        if (!grads_) fail("%s: the model has no gradient buffer (ModelOptions::gradient_buffer = false, ZeRO 2)", what);
    }

    // One layer's activations: views into the stacked (L, ...) buffers.
    struct LayerActs {
        act_t *ln1, *qkv, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
        float *att_state, *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    };
    // Every buffer, stacked over layers where it is per layer. `branch` holds a residual branch's output (the
    // attention projection, later the MLP projection) only until the fused residual + layernorm that follows adds it
    // in: backward never reads it, so one (N, C) buffer serves both and every layer.
    struct Acts {
        act_t *encoded, *ln1, *qkv, *atty, *res2, *ln2, *fch, *fch_gelu, *branch, *res3, *lnf, *logits;
        float *att_state, *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
    };
    struct GradActs {  // activation gradients of one layer at a time, reused layer after layer (by the same role)
        act_t *residual, *buf_c, *buf_3c, *buf_4c;
        float* wte_classifier;  // the classifier's wte gradient of one micro-step, summed over its chunks (fp32)
    };

    void allocate_activations() {
        const std::vector<BufferSize> plan = activation_plan(cfg_, B_, T_, opt_);
        memory_bytes_ = padded_ * (sizeof(act_t) + (grads_ ? sizeof(float) : 0));
        void* buf[NUM_ACT_BUFFERS];
        for (int i = 0; i < NUM_ACT_BUFFERS; i++) {
            buf[i] = be_.alloc(plan[i].bytes());
            owned_.push_back(buf[i]);
            memory_bytes_ += plan[i].bytes();
        }
        inputs_ = (int*)buf[ACT_INPUTS];
        targets_ = (int*)buf[ACT_TARGETS];
        a_.encoded = (act_t*)buf[ACT_ENCODED];
        a_.ln1 = (act_t*)buf[ACT_LN1];
        a_.ln1_mean = (float*)buf[ACT_LN1_MEAN];
        a_.ln1_rstd = (float*)buf[ACT_LN1_RSTD];
        a_.qkv = (act_t*)buf[ACT_QKV];
        a_.atty = (act_t*)buf[ACT_ATTY];
        a_.att_state = (float*)buf[ACT_ATT_STATE];
        a_.res2 = (act_t*)buf[ACT_RES2];
        a_.ln2 = (act_t*)buf[ACT_LN2];
        a_.ln2_mean = (float*)buf[ACT_LN2_MEAN];
        a_.ln2_rstd = (float*)buf[ACT_LN2_RSTD];
        a_.fch = (act_t*)buf[ACT_FCH];
        a_.fch_gelu = (act_t*)buf[ACT_FCH_GELU];
        a_.branch = (act_t*)buf[ACT_BRANCH];
        a_.res3 = (act_t*)buf[ACT_RES3];
        a_.lnf = (act_t*)buf[ACT_LNF];
        a_.lnf_mean = (float*)buf[ACT_LNF_MEAN];
        a_.lnf_rstd = (float*)buf[ACT_LNF_RSTD];
        a_.logits = (act_t*)buf[ACT_LOGITS];
        a_.losses = (float*)buf[ACT_LOSSES];
        d_.residual = (act_t*)buf[GRAD_RESIDUAL];
        d_.buf_c = (act_t*)buf[GRAD_C];
        d_.buf_3c = (act_t*)buf[GRAD_3C];
        d_.buf_4c = (act_t*)buf[GRAD_4C];
        grad_4c_bytes_ = plan[GRAD_4C].bytes();
        d_.wte_classifier = (float*)buf[GRAD_WTE_CLASSIFIER];
    }

    // The classifier over the N rows of lnf, chunk_rows_ rows at a time, so that only one chunk of logits exists:
    //   logits = lnf_rows @ wte^T;  losses_rows (and, training, logits <- dlogits) by the fused classifier;
    //   training: dlnf_rows (d_.buf_c, =) = dlogits @ wte and d_.wte_classifier += dlogits^T @ lnf_rows.
    // Every row's loss, dlogits and dlnf are computed from that row alone, so they do not depend on the chunking;
    // the wte gradient is the fp32 sum over chunks in chunk order (fixed: deterministic), which differs from one
    // unchunked GEMM only in the order of the fp32 additions.
    void classifier_forward(size_t N, bool with_targets, float grad_scale) {
        const size_t C = cfg_.channels, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
        const act_t* wte = param_views().wte();
        const bool training = with_targets && grad_scale > 0.0f;
        if (training) be_.memset_zero(d_.wte_classifier, Vp * C * sizeof(float));
        for (size_t r = 0; r < N; r += chunk_rows_) {
            const size_t n = std::min(chunk_rows_, N - r);
            be_.matmul_forward(a_.logits, a_.lnf + r * C, wte, nullptr, n, C, Vp, nullptr);  // (n,Vp)
            if (!with_targets) continue;
            be_.fused_classifier(a_.logits, a_.losses + r, targets_ + r, grad_scale / (float)N, n, V, Vp, training);
            if (training)
                be_.matmul_backward(d_.buf_c + r * C, d_.wte_classifier, nullptr, a_.logits, a_.lnf + r * C, wte, n,
                                    C, Vp, nullptr);
        }
        logits_valid_ = !training && N <= chunk_rows_;
    }
    void require_logits(const char* what) const {
        if (!logits_valid_)
            fail("%s: the last forward kept no logits (it computed their gradient, or B*T = %zu rows took more than "
                 "one classifier chunk of %zu)", what, cur_B_ * cur_T_, chunk_rows_);
    }

    // Views of layer l at the current batch shape: the stacked buffers are laid out for (B_, T_), and a smaller
    // batch uses the first rows of each layer's slice.
    LayerActs layer_acts(size_t l) const {
        const size_t N = B_ * T_, C = cfg_.channels, NH = cfg_.num_heads;
        LayerActs a;
        a.ln1 = a_.ln1 + (opt_.recompute_layernorm ? 0 : l * N * C);
        a.ln1_mean = a_.ln1_mean + l * N;
        a.ln1_rstd = a_.ln1_rstd + l * N;
        a.qkv = a_.qkv + l * N * 3 * C;
        a.atty = a_.atty + l * N * C;
        a.att_state = a_.att_state + l * Backend::attention_state_elems(B_, T_, NH);
        a.res2 = a_.res2 + l * N * C;
        a.ln2 = a_.ln2 + (opt_.recompute_layernorm ? 0 : l * N * C);
        a.ln2_mean = a_.ln2_mean + l * N;
        a.ln2_rstd = a_.ln2_rstd + l * N;
        a.fch = a_.fch + l * N * 4 * C;
        a.fch_gelu = a_.fch_gelu + (opt_.recompute_gelu ? 0 : l * N * 4 * C);
        a.res3 = a_.res3 + l * N * C;
        return a;
    }

    void check_token(int tok, const char* what) const {
        if (tok < 0 || (size_t)tok >= cfg_.vocab_size)
            fail("%s token %d is outside the vocabulary [0, %zu)", what, tok, cfg_.vocab_size);
    }

    Backend& be_;
    ModelConfig cfg_;
    ParamLayout layout_;
    size_t B_, T_;
    ModelOptions opt_;
    size_t chunk_rows_;  // rows of one classifier chunk (classifier_rows)
    size_t padded_ = 0, memory_bytes_ = 0;
    act_t* params_ = nullptr;
    float* grads_ = nullptr;
    std::vector<std::vector<FlatRange>> bucket_ranges_;  // per gradient bucket, its flat ranges (llmc/zero.h)
    int *inputs_ = nullptr, *targets_ = nullptr;
    Acts a_{};
    GradActs d_{};
    std::vector<void*> owned_;
    size_t cur_B_ = 0, cur_T_ = 0;
    size_t grad_4c_bytes_ = 0;  // d_.buf_4c, also the attention backward's workspace
    float grad_scale_ = 0.0f;
    bool has_targets_ = false;
    bool logits_valid_ = false;  // the logits buffer holds the last forward's logits (classifier_forward)
};

}  // namespace llmc
