// Parameter layout, per-layer views, model descriptors and model files (llm.c format v3/v5, read and write).
#include <unistd.h>

#include <cstring>
#include <vector>

#include "llmc/config.h"
#include "llmc/error.h"
#include "llmc/gpt2_params.h"
#include "llmc/layout.h"
#include "llmc/model_file.h"
#include "test/fixtures/testing.h"

using namespace llmc;

using testing::throws_with;

int main() {
    // GPT-2 124M: the published parameter count with Vp = 50304 (llm.c prints 124475904).
    ModelConfig d12;
    testing::check("descriptor d12", parse_model_descriptor("d12", &d12) && d12.channels == 768 &&
                                         d12.num_heads == 12 && d12.padded_vocab_size == 50304);
    ParamLayout l12(d12);
    testing::check("d12 parameter count", l12.total == 124475904, "got %zu", l12.total);
    ModelConfig d48;
    parse_model_descriptor("d48", &d48);
    testing::check("d48 shape", d48.channels == 1600 && d48.num_heads == 25);
    ModelConfig custom;
    testing::check("explicit descriptor", parse_model_descriptor("L=3,NH=3,C=96,T=24,V=100", &custom) &&
                                              custom.num_layers == 3 && custom.max_seq_len == 24 &&
                                              custom.vocab_size == 100 && custom.padded_vocab_size == 128);
    ModelConfig dummy;
    testing::check("a path is not a descriptor", !parse_model_descriptor("runs/model.bin", &dummy));
    testing::check("bad descriptor: NH does not divide C",
                   throws_with([&] { parse_model_descriptor("L=2,NH=5,C=64", &dummy); }, "divisible"));
    testing::check("bad descriptor: absurd width refused before any size overflows",
                   testing::throws_with([&] { parse_model_descriptor("L=2,NH=2,C=999999999998", &dummy); }, "out of range"));
    testing::check("bad descriptor: unknown key", throws_with([&] { parse_model_descriptor("L=2,X=5,C=64", &dummy); }, "X"));

    // Offsets: each tensor starts where the previous ends, in llm.c's order, with the documented shapes.
    const size_t L = 3, C = 96, Vp = 128, maxT = 24;
    ParamLayout lay(custom);
    const size_t want[NUM_GPT2_TENSORS] = {Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C,
                                            L * C,  L * C,    L * C, L * 4 * C * C, L * 4 * C, L * 4 * C * C,
                                            L * C,  C,        C};
    bool sizes_ok = true, offsets_ok = lay.offsets[0] == 0;
    for (int t = 0; t < lay.num_tensors(); t++) {
        sizes_ok &= lay.sizes[t] == want[t];
        if (t > 0) offsets_ok &= lay.offsets[t] == lay.offsets[t - 1] + lay.sizes[t - 1];
    }
    testing::check("tensor sizes", sizes_ok);
    testing::check("tensor offsets contiguous", offsets_ok && lay.total == lay.offsets[LNFB] + C);
    testing::check("tensor_of", lay.tensor_of(0) == WTE && lay.tensor_of(lay.offsets[QKVB]) == QKVB &&
                                    lay.tensor_of(lay.total - 1) == LNFB);
    ParamViews<float> v(nullptr, lay);
    LayerParams<float> l2 = v.layer(2);
    testing::check("layer view qkvw", l2.qkvw == (float*)nullptr + lay.offsets[QKVW] + 2 * 3 * C * C);
    testing::check("layer view fcprojb", l2.fcprojb == (float*)nullptr + lay.offsets[FCPROJB] + 2 * C);
    testing::check("decayed tensors are the 2-D ones",
                   lay.is_decayed(WTE) && lay.is_decayed(FCPROJW) && !lay.is_decayed(LN1W) &&
                       !lay.is_decayed(QKVB) && !lay.is_decayed(LNFB));

    // A layout is derived from any table: a tensor that is not per layer goes in bucket L + its `bucket`, the
    // per-layer ones in their layer's, and the buckets tile the buffer.
    ModelConfig toy = custom;
    std::vector<ParamSpec> table = {{"embed", {5, 4}, false, true, 0, 1, {}, {}},
                                    {"w", {4, 4}, true, true, 1, 0, {}, {}},
                                    {"g", {4}, true, false, 0, 0, {}, {}},
                                    {"head", {5, 4}, false, true, 0, 0, {}, {}}};
    ParamLayout tl(toy, table);
    const std::vector<FlatRange> b0 = tl.bucket_ranges(0), head = tl.bucket_ranges(L), emb = tl.bucket_ranges(L + 1);
    testing::check("a table's layout: sizes, offsets and total",
                   tl.total == 20 + L * 20 + 20 && tl.offsets[1] == 20 && tl.sizes[1] == L * 16 &&
                       tl.offsets[3] == 20 + L * 20 && tl.slice(2, 1) == 20 + L * 16 + 4);
    testing::check("a table's buckets: L layers, then one per bucket index of the other tensors",
                   tl.num_buckets() == L + 2 && b0.size() == 2 && b0[0].begin == 20 && b0[0].end == 36 &&
                       b0[1].begin == 20 + L * 16 && b0[1].end == 24 + L * 16 && head.size() == 1 &&
                       head[0].begin == tl.offsets[3] && emb.size() == 1 && emb[0].begin == 0 && emb[0].end == 20);
    testing::check("gradient bucket past the last refused", throws_with([&] { tl.bucket_ranges(L + 2); }, "bucket"));
    testing::check("GPT-2's buckets: the layers', then wte, wpe, lnf in one",
                   lay.num_buckets() == L + 1 && lay.bucket_ranges(L).size() == 2 &&
                       lay.bucket_ranges(L)[0].end == lay.offsets[LN1W] && lay.bucket_ranges(L)[1].begin == lay.offsets[LNFW]);
    testing::check("unknown architecture refused", throws_with([&] {
        ModelConfig c = custom;
        c.arch = "nosuch";
        validate_config(c);
    }, "unknown architecture 'nosuch'"));

    // Model files: v3 round trip is exact, v5 rounds to bf16; corrupt files are refused with the reason.
    const std::string dir = testing::tmp_dir("layout");
    std::vector<float> params(lay.total);
    for (size_t i = 0; i < params.size(); i++) params[i] = (float)((i * 2654435761u) % 1000) / 997.0f - 0.5f;
    write_model_file(dir + "/m3.bin", custom, params.data(), false);
    write_model_file(dir + "/m5.bin", custom, params.data(), true);
    ModelFile m3 = read_model_file(dir + "/m3.bin");
    ModelFile m5 = read_model_file(dir + "/m5.bin");
    testing::check("v3 round trip", m3.config == custom && m3.version == 3 && m3.params == params);
    testing::check_close("v5 round trip (bf16: relative 2^-9)", m5.params.data(), params.data(), params.size(),
                         1.0 / 256, 0.0);
    testing::check("read_model_config", read_model_config(dir + "/m3.bin") == custom);
    // Truncate, change the magic, change the version.
    std::string bad = dir + "/bad.bin";
    auto patch = [&](size_t offset, int32_t value, long truncate_to) {
        std::string cp = "cp " + dir + "/m3.bin " + bad;
        if (std::system(cp.c_str()) != 0) std::abort();
        FILE* f = std::fopen(bad.c_str(), "r+b");
        std::fseek(f, (long)offset, SEEK_SET);
        if (value != 0) std::fwrite(&value, 4, 1, f);
        std::fclose(f);
        if (truncate_to > 0 && truncate(bad.c_str(), truncate_to) != 0) std::abort();
    };
    patch(0, 12345, 0);
    testing::check("wrong magic refused", throws_with([&] { read_model_file(bad); }, "magic"));
    patch(4, 4, 0);
    testing::check("wrong version refused", throws_with([&] { read_model_file(bad); }, "version"));
    patch(0, 0, 5000);
    testing::check("truncated file refused", throws_with([&] { read_model_file(bad); }, "bytes"));
    // Versions 6 and 7 name the architecture in the header ([8] its length, [16..] its bytes).
    patch(4, MODEL_VERSION_NAMED_FP32, 0);
    testing::check("a named header without a name refused", throws_with([&] { read_model_file(bad); }, "field 8"));
    patch(4, MODEL_VERSION_NAMED_FP32, 0);
    {
        FILE* f = std::fopen(bad.c_str(), "r+b");
        const int32_t len = 4;
        std::fseek(f, 8 * 4, SEEK_SET);
        std::fwrite(&len, 4, 1, f);
        std::fseek(f, 16 * 4, SEEK_SET);
        std::fwrite("gpt2", 1, 4, f);
        std::fclose(f);
    }
    const ModelFile named = read_model_file(bad);
    testing::check("a named header (version 6) naming gpt2 reads as version 3 does",
                   named.config == custom && named.params == params);
    {
        FILE* f = std::fopen(bad.c_str(), "r+b");
        std::fseek(f, 16 * 4, SEEK_SET);
        std::fwrite("gpt3", 1, 4, f);
        std::fclose(f);
    }
    testing::check("a named header with an unknown architecture refused",
                   throws_with([&] { read_model_file(bad); }, "unknown architecture 'gpt3'"));
    testing::check("missing file refused", throws_with([&] { read_model_file(dir + "/nope.bin"); }, "nope.bin"));
    return testing::finish();
}
