// The model contract: what the trainer, the checkpointer, the validator and the sampler use of a model, whatever its
// architecture (llmc/architectures.h; GPT-2 is llmc/gpt2.h, created by llmc/models.h). Written once over a backend
// (llmc/backend.h), never naming a backend's headers.
//
// A model owns two kinds of device memory:
//   params   act_t, flat, in its parameter table's order (llmc/layout.h), padded to padded_params() elements (zeros
//            past the end: the data-parallel shards, llmc/zero.h)
//   buffers  the activations of one forward pass at the (B, T) it was created for, kept for backward, and
//            backward's scratch: the architecture's activation table (llmc/activations.h)
// Parameter gradients are not the model's: backward hands them to a GradSink (llmc/grad_sink.h) bucket by bucket.
//
// Every architecture ends in the same classifier: a forward with targets leaves one loss per position (and a forward
// without them the logits), which this class reads back from the table's `losses` and `logits` buffers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "activations.h"
#include "backend.h"
#include "config.h"
#include "error.h"
#include "grad_sink.h"
#include "layout.h"
#include "rng.h"

namespace llmc {

struct ModelOptions {
    size_t pad_to = 1;            // padded_params() is a multiple of this (data-parallel shards: ranks x alignment)
    // -r 1: keep only the pre-activation of the MLP, recompute its activation in backward; -r 2: also keep only the
    // normalisations' inputs and statistics and recompute them (llmc/gpt2.h says what each recomputation costs and
    // why it gives the same bits, or which ones it does not)
    bool recompute_gelu = false;
    bool recompute_layernorm = false;
    // Rows per chunk of the classifier (lm_head GEMM, softmax cross-entropy, dlogits, lm_head backward GEMMs): the
    // logits buffer holds one chunk, never the whole (N, Vp). The model uses max(this, T) rows (a forward of one
    // sequence without targets, as sampling does, keeps all its logits), at most N.
    size_t classifier_chunk_rows = 4096;
};

template <class Backend>
class Model {
public:
    using act_t = typename Backend::act_t;

    virtual ~Model() {
        for (void* p : buffers_) be_.free(p);
        be_.free(params_);
    }
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    // Forward over inputs/targets (host, B*T token ids each; B <= max_batch(), T <= max_seq_len()). targets ==
    // nullptr: logits only (B*T rows at most max(classifier_chunk_rows, T)). With targets, per-position losses.
    // grad_scale > 0 prepares backward(): the classifier turns each chunk's logits into d(grad_scale * mean
    // loss)/dlogits as it goes. Training passes grad_scale = 1: each micro-batch's gradient is that of its own mean
    // loss whatever the number of micro-steps or ranks (the data-parallel step takes the mean, llmc/zero_optimizer.h).
    virtual void forward(const int* inputs, const int* targets, size_t B, size_t T, float grad_scale = 0.0f) = 0;
    // d(grad_scale * mean loss)/dparams of the last forward (which must have had targets and grad_scale > 0), added
    // into the sink's buckets, each announced once the ops that complete it are enqueued.
    virtual void backward(GradSink& grads) = 0;

    Backend& backend() { return be_; }
    const ModelConfig& config() const { return cfg_; }
    const ParamLayout& layout() const { return layout_; }
    size_t num_params() const { return layout_.total; }
    size_t padded_params() const { return padded_; }
    size_t max_batch() const { return B_; }
    size_t max_seq_len() const { return T_; }
    // Bytes of device memory held by the model (parameters and buffers).
    size_t memory_bytes() const { return memory_bytes_; }
    act_t* params() { return params_; }

    // Host fp32 values in the layout's order (num_params() of them) -> the device parameters.
    void set_params(const std::vector<float>& host) {
        if (host.size() != layout_.total)
            fail("parameter count %zu does not match the model's %zu (%s)", host.size(), layout_.total,
                 cfg_.describe().c_str());
        be_.upload_floats(params_, host.data(), host.size());
    }
    std::vector<float> get_params() { return get_params(0, layout_.total); }
    // The fp32 values of parameters [begin, end) only: a rank writing its checkpoint shard needs no whole copy.
    std::vector<float> get_params(size_t begin, size_t end) {
        if (begin > end || end > layout_.total)
            fail("get_params: range [%zu, %zu) is outside the model's %zu parameters", begin, end, layout_.total);
        std::vector<float> host(end - begin);
        be_.download_floats(host.data(), params_ + begin, host.size());
        return host;
    }
    // The parameter table's initialisation (ParamSpec::init), deterministic from `seed`: each tensor draws from its
    // own stream (seed, tensor index), so the values do not depend on the order tensors are initialised in.
    void init(uint64_t seed) {
        std::vector<float> host(layout_.total, 0.0f);
        for (int t = 0; t < layout_.num_tensors(); t++) {
            const ParamInit& init = layout_.spec(t).init;
            float* dst = host.data() + layout_.offsets[(size_t)t];
            const size_t size = layout_.sizes[(size_t)t];
            const size_t n = init.rows ? init.rows * (size / layout_.spec(t).shape[0]) : size;
            if (init.kind == ParamInit::Ones) std::fill(dst, dst + n, 1.0f);
            if (init.kind == ParamInit::Constant) std::fill(dst, dst + n, init.std);
            if (init.kind == ParamInit::Uniform) {
                Rng rng(seed, (uint64_t)t);
                for (size_t i = 0; i < n; i++) dst[i] = init.std * (float)(2.0 * rng.uniform() - 1.0);
            }
            if (init.kind != ParamInit::Normal) continue;
            NormalRng rng(seed, (uint64_t)t);
            for (size_t i = 0; i < n; i++) dst[i] = init.std * rng.next();
        }
        set_params(host);
    }

    // Mean of the per-position losses of the last forward (synchronises with the device).
    float mean_loss() {
        const std::vector<float> losses = get_losses();
        double sum = 0;
        for (float x : losses) sum += x;
        return (float)(sum / (double)losses.size());
    }
    // The per-position losses of the last forward (B*T floats; synchronises). For evaluations that need single
    // positions (HellaSwag scores only the completion tokens).
    std::vector<float> get_losses() {
        if (!has_targets_) fail("get_losses: the last forward had no targets");
        std::vector<float> losses(cur_B_ * cur_T_);
        be_.copy_to_host(losses.data(), losses_, losses.size() * sizeof(float));
        return losses;
    }
    // Adds scale * sum(losses of the last forward) into a device float (no host synchronisation).
    void accumulate_loss(float* device_acc, float scale) {
        if (!has_targets_) fail("accumulate_loss: the last forward had no targets");
        be_.sum_into(device_acc, losses_, cur_B_ * cur_T_, scale);
    }
    // The logits of the last forward, (B, T, Vp) as floats; only valid when that forward had grad_scale == 0 and
    // one classifier chunk (B*T <= max(classifier_chunk_rows, T)).
    std::vector<float> get_logits() {
        require_logits("get_logits");
        std::vector<float> host(cur_B_ * cur_T_ * cfg_.padded_vocab_size);
        be_.download_floats(host.data(), logits_, host.size());
        apply_softcap(host);
        return host;
    }
    // Logits of one position (b, t) of the last forward: Vp floats.
    std::vector<float> get_logits_row(size_t b, size_t t) {
        require_logits("get_logits_row");
        if (b >= cur_B_ || t >= cur_T_)
            fail("get_logits_row: (%zu, %zu) is outside the last batch %zux%zu", b, t, cur_B_, cur_T_);
        const size_t Vp = cfg_.padded_vocab_size;
        std::vector<float> host(Vp);
        be_.download_floats(host.data(), logits_ + (b * cur_T_ + t) * Vp, Vp);
        apply_softcap(host);
        return host;
    }

    // Elements of the flat parameter buffer: the parameter count padded to a multiple of opt.pad_to.
    static size_t padded_params(const ParamLayout& layout, const ModelOptions& opt) {
        return (layout.total + opt.pad_to - 1) / opt.pad_to * opt.pad_to;
    }
    // Rows of one classifier chunk (the logits buffer): max(classifier_chunk_rows, T), at most B*T.
    static size_t classifier_rows(size_t B, size_t T, const ModelOptions& opt) {
        const size_t rows = opt.classifier_chunk_rows > T ? opt.classifier_chunk_rows : T;
        return rows < B * T ? rows : B * T;
    }
    // Fails with a message unless a model of this shape can be created with these options (the backend's attention
    // included). An architecture with conditions of its own hides this with a check_shape that calls it.
    static void check_shape(const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt) {
        validate_config(cfg);
        if (B == 0 || T == 0) fail("batch size B=%zu and sequence length T=%zu must be positive", B, T);
        if (T > cfg.max_seq_len)
            fail("sequence length T=%zu is longer than the model's maximum %zu (maxT)", T, cfg.max_seq_len);
        if (opt.pad_to == 0) fail("ModelOptions::pad_to must be positive");
        if (opt.classifier_chunk_rows == 0) fail("ModelOptions::classifier_chunk_rows must be positive");
        Backend::check_attention_shape(cfg.channels, cfg.num_heads);
    }

    // The shape an architecture's activation table (llmc/activations.h) is listed for.
    struct Shape {
        const ModelConfig& cfg;
        size_t B, T;
        const ModelOptions& opt;
    };

protected:
    Model(Backend& be, const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt)
        : be_(be), cfg_(cfg), layout_(cfg), B_(B), T_(T), opt_(opt), chunk_rows_(classifier_rows(B, T, opt)) {
        check_shape(cfg, B, T, opt);
        padded_ = padded_params(layout_, opt);
        params_ = static_cast<act_t*>(be_.alloc(padded_ * sizeof(act_t)));
        memory_bytes_ = padded_ * sizeof(act_t);
    }

    // Pieces of the activation tables of block-structured architectures (GPT-2's and the speedrun's), each with the
    // same members, labels and sizes in both. Buffers: the architecture's, with the members named.
    //
    // The input and target tokens.
    template <class Buffers, class Visit>
    static void visit_token_buffers(Buffers& b, const Shape& s, Visit&& visit) {
        const size_t N = s.B * s.T;
        visit(b.inputs, BufferSize{"input tokens", "N", N, sizeof(int)}, 0);
        visit(b.targets, BufferSize{"target tokens", "N", N, sizeof(int)}, 0);
    }
    // A block's normalised input: one per layer, or with -r 2 one that every layer shares (recomputed in backward).
    template <class Visit>
    static void visit_norm_output(act_t*& out, const char* label, const Shape& s, Visit&& visit) {
        const size_t NC = s.B * s.T * s.cfg.channels, L = s.cfg.num_layers;
        const bool shared = s.opt.recompute_layernorm;
        visit(out, BufferSize{label, shared ? "N x C (-r 2)" : "L x N x C", (shared ? 1 : L) * NC, sizeof(act_t)},
              shared ? 0 : NC);
    }
    // Attention's output and saved state (the backend's, per layer), and the residual stream after attention.
    template <class Buffers, class Visit>
    static void visit_attention_buffers(Buffers& b, const Shape& s, Visit&& visit) {
        const size_t NC = s.B * s.T * s.cfg.channels, L = s.cfg.num_layers;
        const size_t state = Backend::attention_state_elems(s.B, s.T, s.cfg.num_heads);
        visit(b.atty, BufferSize{"attention out", "L x N x C", L * NC, sizeof(act_t)}, NC);
        visit(b.att_state, BufferSize{"attention state", std::string("L x ") + Backend::attention_state_shape,
                                      L * state, sizeof(float)}, state);
        visit(b.res2, BufferSize{"residual 2", "L x N x C", L * NC, sizeof(act_t)}, NC);
    }
    // The MLP's: the first matmul's output (fch), its activation (one per layer, or with -r >= 1 one that every
    // layer shares), the second matmul's output, and the residual stream after the block.
    template <class Buffers, class Visit>
    static void visit_mlp_buffers(Buffers& b, const Shape& s, Visit&& visit, const char* fch_label,
                                  const char* act_label) {
        const size_t NC = s.B * s.T * s.cfg.channels, L = s.cfg.num_layers, A = sizeof(act_t);
        const bool shared = s.opt.recompute_gelu;
        visit(b.fch, BufferSize{fch_label, "L x N x 4C", L * 4 * NC, A}, 4 * NC);
        visit(b.fch_act, BufferSize{act_label, shared ? "N x 4C (-r >= 1)" : "L x N x 4C", (shared ? 1 : L) * 4 * NC,
                                    A}, shared ? 0 : 4 * NC);
        visit(b.branch, BufferSize{"residual branch out", "N x C", NC, A}, 0);
        visit(b.res3, BufferSize{"residual 3", "L x N x C", L * NC, A}, NC);
    }
    // The entries every architecture's activation table has in common, in this order: one chunk of the classifier's
    // logits, the per-position losses, and the backward's gradients reused across layers (the residual stream's, and
    // one buffer each of N x C, N x 3C and N x 4C). Buffers: the architecture's, with these members.
    template <class Buffers, class Visit>
    static void visit_classifier_and_grad_buffers(Buffers& b, const Shape& s, Visit&& visit) {
        const size_t N = s.B * s.T, C = s.cfg.channels, A = sizeof(act_t), F = sizeof(float);
        visit(b.logits, BufferSize{"logits (one chunk)", "min(N, max(chunk, T)) x Vp",
                                   classifier_rows(s.B, s.T, s.opt) * s.cfg.padded_vocab_size, A}, 0);
        visit(b.losses, BufferSize{"losses", "N", N, F}, 0);
        visit(b.d_residual, BufferSize{"d residual", "N x C", N * C, A}, 0);
        visit(b.d_c, BufferSize{"d (N, C)", "N x C", N * C, A}, 0);
        visit(b.d_3c, BufferSize{"d qkv", "N x 3C", N * 3 * C, A}, 0);
        visit(b.d_4c, BufferSize{"d fch", "N x 4C", N * 4 * C, A}, 0);
    }
    // The architecture's buffers, from its activation table (llmc/activations.h): allocated into b (counted in
    // memory_bytes(), freed with the model), and each layer's view of them appended to layers. The classifier leaves
    // the per-position losses in b.losses and one chunk of logits in b.logits.
    template <class Buffers, class Table>
    void allocate_activations(Buffers& b, std::vector<Buffers>& layers, Table&& table) {
        memory_bytes_ += allocate_buffers(be_, b, table, buffers_);
        for (size_t l = 0; l < cfg_.num_layers; l++) layers.push_back(layer_view(b, l, table));
        losses_ = b.losses, logits_ = b.logits;
    }
    // A classifier whose softmax reads cap tanh(z / cap) of the logits z it stores: get_logits() returns those.
    void set_logit_softcap(float cap) { softcap_ = cap; }
    // The start of every forward: checks the batch and the tokens and uploads them into the architecture's buffers.
    void start_forward(const int* inputs, const int* targets, size_t B, size_t T, float grad_scale, int* dev_inputs,
                       int* dev_targets) {
        if (B > B_ || T > T_ || B == 0 || T == 0)
            fail("forward: batch %zux%zu does not fit the model's activations %zux%zu", B, T, B_, T_);
        const size_t N = B * T;
        if (!targets && N > chunk_rows_)
            fail("forward without targets keeps the logits of at most %zu rows (ModelOptions::classifier_chunk_rows), "
                 "got B*T = %zu", chunk_rows_, N);
        for (size_t i = 0; i < N; i++) check_token(inputs[i], "input");
        be_.upload_tokens(dev_inputs, inputs, N);
        has_targets_ = targets != nullptr;
        if (targets) {
            for (size_t i = 0; i < N; i++) check_token(targets[i], "target");
            be_.copy_to_device(dev_targets, targets, N * sizeof(int));
        }
        cur_B_ = B, cur_T_ = T, grad_scale_ = grad_scale;
    }
    // The start of every backward: the last forward must have prepared it.
    void start_backward() const {
        if (!has_targets_ || !(grad_scale_ > 0.0f)) fail("backward: the last forward had no targets or grad_scale 0");
    }
    // After the classifier: whether its logits buffer holds the whole last forward's logits.
    void set_logits_kept(bool kept) { logits_valid_ = kept; }

    // The classifier over the N rows of x (N, C) against head (Vp, C), chunk_rows_ rows at a time, so that only one
    // chunk of logits exists (in the table's `logits` buffer):
    //   logits = x_rows @ head^T;  the rows' losses (and, training, logits <- dlogits) by the fused classifier, on
    //   cap tanh(z / cap) when cap > 0;  training: dx_rows (=) = dlogits @ head and dhead (fp32) += dlogits^T @ x_rows,
    //   dhead zeroed first.
    // Every row's loss, dlogits and dx are computed from that row alone, so they do not depend on the chunking; the
    // head's gradient is the fp32 sum over chunks in chunk order (fixed: deterministic), which differs from one
    // unchunked GEMM only in the order of the fp32 additions. `targets` (device) null: logits only.
    void classify(const act_t* x, const act_t* head, act_t* dx, float* dhead, const int* targets, size_t N,
                  float grad_scale, float cap) {
        const size_t C = cfg_.channels, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
        const bool training = targets && grad_scale > 0.0f;
        if (training) be_.memset_zero(dhead, Vp * C * sizeof(float));
        for (size_t r = 0; r < N; r += chunk_rows_) {
            const size_t n = std::min(chunk_rows_, N - r);
            be_.matmul_forward(logits_, x + r * C, head, nullptr, n, C, Vp, nullptr);  // (n,Vp)
            if (!targets) continue;
            const float dloss = grad_scale / (float)N;
            if (cap > 0.0f)
                be_.softcap_classifier(logits_, losses_ + r, targets + r, dloss, n, V, Vp, training, cap);
            else
                be_.fused_classifier(logits_, losses_ + r, targets + r, dloss, n, V, Vp, training);
            if (training)
                be_.matmul_backward(dx + r * C, dhead, nullptr, logits_, x + r * C, head, n, C, Vp, nullptr, nullptr);
        }
        set_logits_kept(!training && N <= chunk_rows_);
    }

    Backend& be_;
    const ModelConfig cfg_;
    const ParamLayout layout_;
    const size_t B_, T_;           // the batch the buffers were created for
    const ModelOptions opt_;
    const size_t chunk_rows_;      // rows of one classifier chunk (classifier_rows)
    size_t padded_ = 0;
    act_t* params_ = nullptr;
    size_t cur_B_ = 0, cur_T_ = 0; // the last forward's batch
    float grad_scale_ = 0.0f;

private:
    void check_token(int tok, const char* what) const {
        if (tok < 0 || (size_t)tok >= cfg_.vocab_size)
            fail("%s token %d is outside the vocabulary [0, %zu)", what, tok, cfg_.vocab_size);
    }
    void require_logits(const char* what) const {
        if (!logits_valid_)
            fail("%s: the last forward kept no logits (it computed their gradient, or B*T = %zu rows took more than "
                 "one classifier chunk of %zu)", what, cur_B_ * cur_T_, chunk_rows_);
    }

    // The values the softmax reads, computed on the host in fp32 as the classifier does on the device.
    void apply_softcap(std::vector<float>& logits) const {
        if (softcap_ <= 0.0f) return;
        for (float& z : logits) z = softcap_ * std::tanh(z / softcap_);
    }

    size_t memory_bytes_ = 0;
    std::vector<void*> buffers_;  // allocate_activations'
    float softcap_ = 0.0f;
    float* losses_ = nullptr;
    act_t* logits_ = nullptr;
    bool has_targets_ = false;
    bool logits_valid_ = false;
};

// The buffers a model of architecture Arch allocates at this shape, without allocating anything: the dry run's plan,
// from the table the allocation reads. Arch: a Model subclass with a public activation table (Buffers, buffer_table),
// as llmc/gpt2.h's.
template <class Arch>
std::vector<BufferSize> plan_activations(const ModelConfig& cfg, size_t B, size_t T, const ModelOptions& opt) {
    Arch::check_shape(cfg, B, T, opt);
    return plan_buffers<typename Arch::Buffers>(activation_table<Arch>(typename Arch::Shape{cfg, B, T, opt}));
}

}  // namespace llmc
