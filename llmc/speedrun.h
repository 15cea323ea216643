// The NanoGPT speedrun's architecture (docs/speedrun.md), written once over a backend (llmc/backend.h); its
// parameters are the table of llmc/speedrun_params.h, its buffers the table below. N = B*T rows throughout.
//
//   x0 = rmsnorm(wte[inputs])                                   no position embedding
//   layer l, reading res_in (= x0 for l = 0, else layer l-1's res3):
//     h1 = rmsnorm(res_in);  qkv = h1 @ qkvw^T;  q, k <- rotary(rmsnorm per head)   (in place on qkv)
//     res2 = res_in + attention(qkv) @ attprojw^T            (fused with h2 = rmsnorm(res2))
//     res3 = res2 + relu(h2 @ fcw^T)^2 @ fcprojw^T           (fused with the next layer's h1, or with hf)
//   hf = rmsnorm(res3 of the last layer);  logits = hf @ lm_head^T;  loss of cap tanh(logits / cap) (cap 0: none)
// The ShortcutsTweaks record's options (ModelConfig::arch_flags): the embedding skip makes each layer's input
// l0 res_in + l1 x0 (then the layer's first RMSNorm is computed again from it); the value residual mixes each layer's
// v (l >= 1) with layer 0's, v = (1 - lam) v + lam v1, before the attention.
// No biases, no norm gains. Recomputation as GPT-2's (llmc/gpt2.h): -r 1 recomputes relu(fch)^2 in backward from the
// kept pre-activation (the same op on the same input: bit-identical), -r 2 also the layers' RMSNorm outputs from
// their inputs and the kept rstd (bit-identical).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "activations.h"
#include "backend.h"
#include "model.h"
#include "rotary_table.h"
#include "speedrun_params.h"

namespace llmc {

template <class Backend>
class Speedrun : public Model<Backend> {
public:
    Speedrun(Backend& be, const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt = ModelOptions())
        : Model<Backend>(be, cfg, B, T, opt) {  // checks the shape (the even head size: the architecture's entry)
        this->allocate_activations(b_, layers_, activation_table<Speedrun>(Shape{cfg, B, T, opt}));
        const std::vector<float> rotary = rotary_table(T, cfg.head_size());
        be.copy_to_device(b_.rotary, rotary.data(), rotary.size() * sizeof(float));
        this->set_logit_softcap(speedrun_softcap(cfg));
    }

    using act_t = typename Backend::act_t;

    void forward(const int* inputs, const int* targets, size_t B, size_t T, float grad_scale = 0.0f) override {
        this->start_forward(inputs, targets, B, T, grad_scale, b_.inputs, b_.targets);
        const size_t C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers, N = B * T;
        const SpeedrunViews<act_t> p = param_views();
        be_.encoder_forward(b_.encoded, b_.inputs, p.wte(), nullptr, B, T, C);              // (B,T,C)
        be_.rmsnorm_forward(b_.x0, b_.x0_rstd, b_.encoded, N, C);                             // (B,T,C)
        be_.rmsnorm_forward(layers_[0].h1, layers_[0].rstd1, b_.x0, N, C);
        for (size_t l = 0; l < L; l++) {
            const SpeedrunLayerParams<act_t> w = p.layer(l);
            const Buffers& a = layers_[l];
            const act_t* res_in = layer_input(l);
            if (embed_skip()) {                                                               // x = l0 x + l1 x0
                be_.embed_skip_forward(a.mixed, residual_in(l), b_.x0, w.skip_x, w.skip_x0, N * C);
                be_.rmsnorm_forward(a.h1, a.rstd1, a.mixed, N, C);
            }
            be_.matmul_forward(a.qkv, a.h1, w.qkvw, nullptr, N, C, 3 * C, nullptr);           // (B,T,3C)
            if (value_residual() && l > 0) be_.value_residual_forward(a.qkv, a.v_pre, layers_[0].qkv, w.vlambda, N, C);
            be_.qk_norm_rotary_forward(a.qkv, a.qk_rstd, b_.rotary, B, T, C, NH);             // q, k in place
            be_.attention_forward(a.atty, a.att_state, a.qkv, B, T, C, NH);                   // (B,T,C) + state
            be_.matmul_forward(b_.branch, a.atty, w.attprojw, nullptr, N, C, C, nullptr);     // (B,T,C)
            be_.fused_residual_rmsnorm_forward(a.res2, a.h2, a.rstd2, res_in, b_.branch, N, C);
            be_.matmul_forward(a.fch, a.h2, w.fcw, nullptr, N, C, 4 * C, nullptr);            // (B,T,4C)
            be_.relu2_forward(a.fch_act, a.fch, N * 4 * C);                                   // (B,T,4C)
            be_.matmul_forward(b_.branch, a.fch_act, w.fcprojw, nullptr, N, 4 * C, C, nullptr);
            // res3 = res2 + fcproj, normalised by the next layer's first RMSNorm or by the final one.
            const bool last = l + 1 == L;
            be_.fused_residual_rmsnorm_forward(a.res3, last ? b_.hf : layers_[l + 1].h1,
                                               last ? b_.hf_rstd : layers_[l + 1].rstd1, a.res2, b_.branch, N, C);
        }
        // The classifier (llmc/model.h): logits = hf @ lm_head^T (untied), capped; the losses, dhf, lm_head's gradient.
        this->classify(b_.hf, p.lm_head(), b_.d_c, b_.d_head_classifier, targets ? b_.targets : nullptr, N,
                       grad_scale, speedrun_softcap(cfg_));                                   // (B,T) losses
    }

    // One bucket after the layers' (wte and lm_head): the classifier (in forward) left lm_head's gradient, the
    // embedding's comes last. The layers from the last, each its own bucket.
    void backward(GradSink& grads) override {
        this->start_backward();
        const size_t B = this->cur_B_, T = this->cur_T_, N = B * T;
        const size_t C = cfg_.channels, L = cfg_.num_layers, Vp = cfg_.padded_vocab_size;
        const BucketGrads gL = grads.open_bucket(L);
        be_.add_into(gL.at(layout_.offsets[SR_LM_HEAD]), b_.d_head_classifier, Vp * C);
        be_.memset_zero(b_.d_residual, N * C * sizeof(act_t));
        if (embed_skip()) be_.memset_zero(b_.d_x0, N * C * sizeof(act_t));
        if (value_residual()) be_.memset_zero(b_.d_v1, N * C * sizeof(float));
        be_.rmsnorm_backward(b_.d_residual, b_.d_c, layers_[L - 1].res3, b_.hf_rstd, N, C);
        // b_.d_residual now holds dL/d(res3 of layer L-1); each layer turns it into dL/d(its res_in).
        for (size_t l = L; l-- > 0;) {
            const BucketGrads gl = grads.open_bucket(l);
            const SpeedrunLayerParams<float> gw =
                SpeedrunViews<float>::layer_at(layout_, l, [&](size_t flat) { return gl.at(flat); });
            layer_backward(l, gw);
            if (embed_skip()) {  // d_residual: dL/d(the mixed input) -> dL/d(res_in), and x0's share into d_x0
                const SpeedrunLayerParams<act_t> w = param_views().layer(l);
                be_.embed_skip_backward(b_.d_residual, b_.d_x0, gw.skip_x, gw.skip_x0, b_.d_residual, residual_in(l),
                                        b_.x0, w.skip_x, w.skip_x0, N * C);
            }
            grads.bucket_done(l);  // layer l's gradient slices are complete
        }
        // x0 = rmsnorm(encoded): the embedding rows' gradient through it (the embedding skip's share too: the
        // backward is linear in dout, so the two shares are added by two calls).
        be_.memset_zero(b_.d_c, N * C * sizeof(act_t));
        be_.rmsnorm_backward(b_.d_c, b_.d_residual, b_.encoded, b_.x0_rstd, N, C);
        if (embed_skip()) be_.rmsnorm_backward(b_.d_c, b_.d_x0, b_.encoded, b_.x0_rstd, N, C);
        be_.encoder_backward(gL.at(layout_.offsets[SR_WTE]), nullptr, b_.d_c, b_.inputs, B, T, C);
        grads.bucket_done(L);  // wte, lm_head
    }

    // ---- the activation table: every buffer of the model, as data (llmc/activations.h) ----
    using Shape = typename Model<Backend>::Shape;
    // Every buffer; layer views (layers_) point the per-layer ones at their layer's slice. `branch` holds a residual
    // branch's output until the fused residual + RMSNorm that follows adds it in (as GPT-2's).
    struct Buffers {
        int *inputs, *targets;
        float* rotary;  // the rotary table (T x hs, fp32)
        act_t *encoded, *x0, *h1, *qkv, *atty, *res2, *h2, *fch, *fch_act, *branch, *res3, *hf, *logits;
        float *x0_rstd, *rstd1, *qk_rstd, *att_state, *rstd2, *hf_rstd, *losses;
        act_t *d_residual, *d_c, *d_3c, *d_4c;
        float* d_head_classifier;  // the classifier's lm_head gradient of one micro-step, summed over its chunks
        act_t *mixed, *d_x0;       // the embedding skip: each layer's mixed input; x0's gradient through the skips
        act_t* v_pre;              // the value residual: each layer's v before the mix
        float* d_v1;               // the value residual: layer 0's v gradient from the later layers (fp32)
    };

    // The one list of the speedrun's buffers, in allocation order (llmc/activations.h).
    template <class Visit>
    static void buffer_table(Buffers& b, const Shape& s, Visit&& visit) {
        const size_t N = s.B * s.T, C = s.cfg.channels, L = s.cfg.num_layers, NH = s.cfg.num_heads;
        const size_t A = sizeof(act_t), F = sizeof(float);
        Base::visit_token_buffers(b, s, visit);
        visit(b.rotary, BufferSize{"rotary table", "T x C/NH", rotary_table_floats(s.T, s.cfg.head_size()), F}, 0);
        visit(b.encoded, BufferSize{"embedded", "N x C", N * C, A}, 0);
        visit(b.x0, BufferSize{"x0 (normalised embedding)", "N x C", N * C, A}, 0);
        visit(b.x0_rstd, BufferSize{"x0 rstd", "N", N, F}, 0);
        Base::visit_norm_output(b.h1, "rmsnorm 1", s, visit);
        visit(b.rstd1, BufferSize{"rmsnorm 1 rstd", "L x N", L * N, F}, N);
        visit(b.qkv, BufferSize{"qkv (q, k rotated)", "L x N x 3C", L * N * 3 * C, A}, N * 3 * C);
        visit(b.qk_rstd, BufferSize{"qk-norm rstd", "L x N x 2NH", L * N * 2 * NH, F}, N * 2 * NH);
        Base::visit_attention_buffers(b, s, visit);
        Base::visit_norm_output(b.h2, "rmsnorm 2", s, visit);
        visit(b.rstd2, BufferSize{"rmsnorm 2 rstd", "L x N", L * N, F}, N);
        Base::visit_mlp_buffers(b, s, visit, "fch (pre-ReLU^2)", "relu(fch)^2");
        visit(b.hf, BufferSize{"final rmsnorm", "N x C", N * C, A}, 0);
        visit(b.hf_rstd, BufferSize{"final rmsnorm rstd", "N", N, F}, 0);
        Base::visit_classifier_and_grad_buffers(b, s, visit);
        visit(b.d_head_classifier, BufferSize{"d lm_head (classifier)", "Vp x C, fp32", s.cfg.padded_vocab_size * C,
                                              F}, 0);
        if (s.cfg.arch_flags & SR_FLAG_EMBED_SKIP) {
            visit(b.mixed, BufferSize{"embedding skip input", "L x N x C", L * N * C, A}, N * C);
            visit(b.d_x0, BufferSize{"d x0 (embedding skip)", "N x C", N * C, A}, 0);
        }
        if (s.cfg.arch_flags & SR_FLAG_VALUE_RESIDUAL) {
            visit(b.v_pre, BufferSize{"v before the value residual", "L x N x C", L * N * C, A}, N * C);
            visit(b.d_v1, BufferSize{"d v1 (value residual)", "N x C, fp32", N * C, F}, 0);
        }
    }

private:
    using Base = Model<Backend>;
    using Base::be_, Base::cfg_, Base::layout_, Base::opt_;

    SpeedrunViews<act_t> param_views() { return SpeedrunViews<act_t>(this->params_, layout_); }
    bool embed_skip() const { return cfg_.arch_flags & SR_FLAG_EMBED_SKIP; }
    bool value_residual() const { return cfg_.arch_flags & SR_FLAG_VALUE_RESIDUAL; }
    // The residual stream entering layer l (x0, or the previous layer's res3), and the layer's input: that, or its
    // embedding-skip mix.
    const act_t* residual_in(size_t l) const { return l == 0 ? b_.x0 : layers_[l - 1].res3; }
    const act_t* layer_input(size_t l) const { return embed_skip() ? layers_[l].mixed : residual_in(l); }

    // Layer l's backward: d_residual holds dL/d(its res3) and becomes dL/d(its res_in); gw: its gradient slices.
    void layer_backward(size_t l, const SpeedrunLayerParams<float>& gw) {
        const size_t B = this->cur_B_, T = this->cur_T_, N = B * T, C = cfg_.channels, NH = cfg_.num_heads;
        const SpeedrunLayerParams<act_t> w = param_views().layer(l);
        const Buffers& a = layers_[l];
        const act_t* res_in = layer_input(l);
        if (opt_.recompute_gelu) be_.relu2_forward(a.fch_act, a.fch, N * 4 * C);
        if (opt_.recompute_layernorm) be_.rmsnorm_forward(a.h2, a.rstd2, a.res2, N, C);
        // MLP: res3 = res2 + fcproj(relu(fc(rmsnorm(res2)))^2)
        be_.matmul_backward(a.d_4c, gw.fcprojw, nullptr, a.d_residual, a.fch_act, w.fcprojw, N, 4 * C, C, nullptr,
                            nullptr);
        be_.relu2_backward_inplace(a.d_4c, a.fch, N * 4 * C);
        be_.matmul_backward(a.d_c, gw.fcw, nullptr, a.d_4c, a.h2, w.fcw, N, C, 4 * C, nullptr, nullptr);
        be_.rmsnorm_backward(a.d_residual, a.d_c, a.res2, a.rstd2, N, C);
        // Attention: res2 = res_in + attproj(attention(rotary(qk-norm(qkv(rmsnorm(res_in))))))
        be_.matmul_backward(a.d_c, gw.attprojw, nullptr, a.d_residual, a.atty, w.attprojw, N, C, C, nullptr, nullptr);
        be_.attention_backward(a.d_3c, a.d_c, a.qkv, a.atty, a.att_state, B, T, C, NH);
        if (value_residual() && l > 0)  // the later layers' share of v1 collects in d_v1, added at layer 0
            be_.value_residual_backward(a.d_3c, b_.d_v1, gw.vlambda, a.v_pre, layers_[0].qkv, w.vlambda, N, C);
        if (value_residual() && l == 0) be_.value_residual_add(a.d_3c, b_.d_v1, N, C);
        be_.qk_norm_rotary_backward(a.d_3c, a.qkv, a.qk_rstd, b_.rotary, B, T, C, NH);
        if (opt_.recompute_layernorm) be_.rmsnorm_forward(a.h1, a.rstd1, res_in, N, C);
        be_.matmul_backward(a.d_c, gw.qkvw, nullptr, a.d_3c, a.h1, w.qkvw, N, C, 3 * C, nullptr, nullptr);
        be_.rmsnorm_backward(a.d_residual, a.d_c, res_in, a.rstd1, N, C);
    }

    Buffers b_{};
    std::vector<Buffers> layers_;  // layer l's view of b_
};

}  // namespace llmc
