// GPT-2, written once over a backend (llmc/backend.h: the ops and their semantics); its parameters are the table of
// llmc/gpt2_params.h, its buffers the table below. Forward reads top to bottom, one op per line with its shapes;
// N = B*T rows throughout.
//
// Residual stream: layer l reads res_in (= encoded for l = 0, else layer l-1's res3) and writes
//   res2 = res_in + attproj(attention(ln1(res_in)))         (fused with ln2: ln2 = layernorm(res2))
//   res3 = res2 + fcproj(gelu(fc(ln2)))                     (fused with the next layer's ln1, or with lnf)
// so layer l's ln1 is computed by layer l-1 (or by a plain layernorm of the encoding for l = 0).
//
// Recomputation (ModelOptions):
//   -r 1  keep only the pre-GELU activations, recompute gelu(fch) in backward. The forward is the same as -r 0. The
//         recomputed gelu(fch) is the CPU backend's forward value bit for bit; on the CUDA backend the forward's fused
//         GELU_AUX epilogue takes GELU of the fp32 accumulator while the recompute takes it of the stored bf16 fch, so
//         an element may differ by at most 1.01 U (|g0| + |g1| + 1.13 |fch|) + 2^-20 (1 + |fch|^3), U = 2^-8 (bf16's
//         unit roundoff; test/sim/test_kernels.cpp checks exactly this), and bit for bit where the forward is not
//         fused (4C not a multiple of 8). That value feeds only fcproj's weight gradient.
//   -r 2  also keep only the layernorms' inputs and statistics, recompute ln1 and ln2 in backward (one (N, C) buffer
//         each instead of L). The recomputation repeats the forward's exact ops on the same inputs: bit-identical.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "activations.h"
#include "backend.h"
#include "gpt2_params.h"
#include "model.h"

namespace llmc {

template <class Backend>
class Gpt2 : public Model<Backend> {
public:
    Gpt2(Backend& be, const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt = ModelOptions())
        : Model<Backend>(be, cfg, B, T, opt) {  // checks the shape
        this->allocate_activations(b_, layers_, activation_table<Gpt2>(Shape{cfg, B, T, opt}));
    }

    using act_t = typename Backend::act_t;

    void forward(const int* inputs, const int* targets, size_t B, size_t T, float grad_scale = 0.0f) override {
        this->start_forward(inputs, targets, B, T, grad_scale, b_.inputs, b_.targets);
        const size_t C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers, N = B * T;
        const ParamViews<act_t> p = param_views();
        be_.encoder_forward(b_.encoded, b_.inputs, p.wte(), p.wpe(), B, T, C);               // (B,T,C)
        be_.layernorm_forward(b_.ln1, b_.ln1_mean, b_.ln1_rstd, b_.encoded,                  // (B,T,C)
                              p.layer(0).ln1w, p.layer(0).ln1b, N, C);
        for (size_t l = 0; l < L; l++) {
            const LayerParams<act_t> w = p.layer(l);
            const Buffers& a = layers_[l];
            const act_t* res_in = l == 0 ? b_.encoded : layers_[l - 1].res3;
            be_.matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, N, C, 3 * C);                   // (B,T,3C)
            be_.attention_forward(a.atty, a.att_state, a.qkv, B, T, C, NH);                   // (B,T,C) + state
            be_.matmul_forward(a.branch, a.atty, w.attprojw, w.attprojb, N, C, C);           // (B,T,C)
            be_.fused_residual_layernorm_forward(a.res2, a.ln2, a.ln2_mean, a.ln2_rstd,       // (B,T,C) x2
                                                 res_in, a.branch, w.ln2w, w.ln2b, N, C);
            be_.matmul_forward(a.fch_act, a.ln2, w.fcw, w.fcb, N, C, 4 * C, a.fch);          // (B,T,4C) x2
            be_.matmul_forward(a.branch, a.fch_act, w.fcprojw, w.fcprojb, N, 4 * C, C);     // (B,T,C)
            // res3 = res2 + fcproj, normalised by the next layer's ln1 or by the final layernorm.
            const bool last = l + 1 == L;
            const Buffers& next = last ? a : layers_[l + 1];
            be_.fused_residual_layernorm_forward(a.res3, last ? b_.lnf : next.ln1, last ? b_.lnf_mean : next.ln1_mean,
                                                 last ? b_.lnf_rstd : next.ln1_rstd, a.res2, a.branch,
                                                 last ? p.lnfw() : p.layer(l + 1).ln1w,
                                                 last ? p.lnfb() : p.layer(l + 1).ln1b, N, C);
        }
        // The classifier (llmc/model.h): logits = lnf @ wte^T (weight tying), the losses, dlnf and wte's gradient.
        this->classify(b_.lnf, p.wte(), b_.d_c, b_.d_wte_classifier, targets ? b_.targets : nullptr, N, grad_scale,
                       0.0f);                                                                 // (B,T) losses
    }

    // Bucket L (wte, wpe, lnfw, lnfb) first: the classifier (in forward) left its wte gradient and dL/dlnf; the
    // encoder, last, adds the rest of wte and wpe. Then the layers from the last, each its own bucket.
    void backward(GradSink& grads) override {
        this->start_backward();
        const size_t B = this->cur_B_, T = this->cur_T_, N = B * T;
        const size_t C = cfg_.channels, L = cfg_.num_layers, Vp = cfg_.padded_vocab_size;
        const ParamViews<act_t> p = param_views();
        const BucketGrads gL = grads.open_bucket(L);
        float* dwte = gL.at(layout_.offsets[WTE]);
        be_.add_into(dwte, b_.d_wte_classifier, Vp * C);
        be_.memset_zero(b_.d_residual, N * C * sizeof(act_t));
        be_.layernorm_backward(b_.d_residual, gL.at(layout_.offsets[LNFW]), gL.at(layout_.offsets[LNFB]), b_.d_c,
                               layers_[L - 1].res3, p.lnfw(), b_.lnf_mean, b_.lnf_rstd, N, C);
        // b_.d_residual now holds dL/d(res3 of layer L-1); each layer turns it into dL/d(its res_in).
        for (size_t l = L; l-- > 0;) {
            const BucketGrads gl = grads.open_bucket(l);
            layer_backward(l, layer_slices<float>(layout_, l, [&](size_t flat) { return gl.at(flat); }));
            grads.bucket_done(l);  // layer l's 12 gradient slices are complete
        }
        be_.encoder_backward(dwte, gL.at(layout_.offsets[WPE]), b_.d_residual, b_.inputs, B, T, C);
        grads.bucket_done(L);  // wte (classifier + encoder), wpe, lnfw, lnfb
    }

    // ---- the activation table: every buffer of the model, as data (llmc/activations.h) ----
    using Shape = typename Model<Backend>::Shape;
    // Every buffer; layer views (layers_) point the per-layer ones at their layer's slice. `branch` holds a residual
    // branch's output (the attention projection, later the MLP projection) only until the fused residual + layernorm
    // that follows adds it in: backward never reads it, so one (N, C) buffer serves both and every layer. The
    // activation gradients (d_*) are reused layer after layer, each always in the same role.
    struct Buffers {
        int *inputs, *targets;
        act_t *encoded, *ln1, *qkv, *atty, *res2, *ln2, *fch, *fch_act, *branch, *res3, *lnf, *logits;
        float *ln1_mean, *ln1_rstd, *att_state, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
        act_t *d_residual, *d_c, *d_3c, *d_4c;
        float* d_wte_classifier;  // the classifier's wte gradient of one micro-step, summed over its chunks (fp32)
    };

    // The one list of GPT-2's buffers, in allocation order (llmc/activations.h).
    template <class Visit>
    static void buffer_table(Buffers& b, const Shape& s, Visit&& visit) {
        const size_t N = s.B * s.T, C = s.cfg.channels, L = s.cfg.num_layers;
        const size_t A = sizeof(act_t), F = sizeof(float);
        Base::visit_token_buffers(b, s, visit);
        visit(b.encoded, BufferSize{"encoded", "N x C", N * C, A}, 0);
        Base::visit_norm_output(b.ln1, "ln1", s, visit);
        visit(b.ln1_mean, BufferSize{"ln1 mean", "L x N", L * N, F}, N);
        visit(b.ln1_rstd, BufferSize{"ln1 rstd", "L x N", L * N, F}, N);
        visit(b.qkv, BufferSize{"qkv", "L x N x 3C", L * N * 3 * C, A}, N * 3 * C);
        Base::visit_attention_buffers(b, s, visit);
        Base::visit_norm_output(b.ln2, "ln2", s, visit);
        visit(b.ln2_mean, BufferSize{"ln2 mean", "L x N", L * N, F}, N);
        visit(b.ln2_rstd, BufferSize{"ln2 rstd", "L x N", L * N, F}, N);
        Base::visit_mlp_buffers(b, s, visit, "fch (pre-GELU)", "gelu(fch)");
        visit(b.lnf, BufferSize{"lnf", "N x C", N * C, A}, 0);
        visit(b.lnf_mean, BufferSize{"lnf mean", "N", N, F}, 0);
        visit(b.lnf_rstd, BufferSize{"lnf rstd", "N", N, F}, 0);
        Base::visit_classifier_and_grad_buffers(b, s, visit);
        visit(b.d_wte_classifier, BufferSize{"d wte (classifier)", "Vp x C, fp32", s.cfg.padded_vocab_size * C, F}, 0);
    }

private:
    using Base = Model<Backend>;
    using Base::be_, Base::cfg_, Base::layout_, Base::opt_;

    ParamViews<act_t> param_views() { return ParamViews<act_t>(this->params_, layout_); }
    // Layer l's backward: d_residual holds dL/d(its res3) and becomes dL/d(its res_in); gw: its gradient slices.
    void layer_backward(size_t l, const LayerParams<float>& gw) {
        const size_t B = this->cur_B_, T = this->cur_T_, N = B * T, C = cfg_.channels, NH = cfg_.num_heads;
        const LayerParams<act_t> w = param_views().layer(l);
        const Buffers& a = layers_[l];
        const act_t* res_in = l == 0 ? b_.encoded : layers_[l - 1].res3;
        if (opt_.recompute_gelu) be_.gelu_forward(a.fch_act, a.fch, N * 4 * C);
        if (opt_.recompute_layernorm)
            be_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2w, w.ln2b, N, C);
        // MLP: res3 = res2 + fcproj(gelu(fc(ln2(res2))))
        // fcproj's input is gelu(fch): its dinp is written as the gradient with respect to fch (dinp_pre_gelu)
        be_.matmul_backward(a.d_4c, gw.fcprojw, gw.fcprojb, a.d_residual, a.fch_act, w.fcprojw, N, 4 * C, C, nullptr,
                            a.fch);
        be_.matmul_backward(a.d_c, gw.fcw, gw.fcb, a.d_4c, a.ln2, w.fcw, N, C, 4 * C);
        be_.layernorm_backward(a.d_residual, gw.ln2w, gw.ln2b, a.d_c, a.res2, w.ln2w, a.ln2_mean, a.ln2_rstd, N, C);
        // Attention: res2 = res_in + attproj(attention(qkv(ln1(res_in))))
        be_.matmul_backward(a.d_c, gw.attprojw, gw.attprojb, a.d_residual, a.atty, w.attprojw, N, C, C);
        be_.attention_backward(a.d_3c, a.d_c, a.qkv, a.atty, a.att_state, B, T, C, NH);
        if (opt_.recompute_layernorm) be_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, res_in, w.ln1w, w.ln1b, N, C);
        be_.matmul_backward(a.d_c, gw.qkvw, gw.qkvb, a.d_3c, a.ln1, w.qkvw, N, C, 3 * C);
        be_.layernorm_backward(a.d_residual, gw.ln1w, gw.ln1b, a.d_c, res_in, w.ln1w, a.ln1_mean, a.ln1_rstd, N, C);
    }

    Buffers b_{};
    std::vector<Buffers> layers_;  // layer l's view of b_
};

}  // namespace llmc
