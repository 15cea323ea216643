#include "config.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "architectures.h"
#include "error.h"

namespace llmc {

std::string ModelConfig::describe() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "L=%zu NH=%zu C=%zu maxT=%zu V=%zu Vp=%zu", num_layers, num_heads, channels,
                  max_seq_len, vocab_size, padded_vocab_size);
    const std::string flags = arch_flags ? "(flags " + std::to_string(arch_flags) + ")" : "";
    return (arch == "gpt2" ? "" : "arch=" + arch + flags + " ") + buf;
}

void validate_config(const ModelConfig& c) {
    const Architecture& a = architecture(c.arch);  // a known one
    if (c.arch_flags & ~a.known_flags)
        fail("model config %s: architecture flags %u, %s knows %u", c.describe().c_str(), c.arch_flags, a.name,
             a.known_flags);
    if (c.num_layers == 0 || c.num_heads == 0 || c.channels == 0 || c.max_seq_len == 0 || c.vocab_size == 0)
        fail("model config %s: every size must be positive", c.describe().c_str());
    if (c.channels % c.num_heads != 0)
        fail("model config %s: channels %zu must be divisible by the number of heads %zu", c.describe().c_str(),
             c.channels, c.num_heads);
    // Upper limits: the model file stores each size as an int32, and every product below (e.g. Vp*C, L*4C*C)
    // must stay far from overflowing size_t. GPT-2 1.5B is L=48, C=1600, maxT=1024, Vp=50304.
    const size_t max_dim = (size_t)1 << 24;
    if (c.num_layers > 4096 || c.channels > max_dim || c.max_seq_len > max_dim || c.padded_vocab_size > max_dim ||
        c.num_heads > c.channels)
        fail("model config %s: sizes out of range (at most L=4096, C, maxT, Vp <= %zu, NH <= C)", c.describe().c_str(),
             max_dim);
    // The parameter count (and the model file's byte count, 4 per parameter) must not wrap size_t: with the limits
    // above, 12 L C^2 alone reaches 2^66, and a crafted header whose wrapped byte count matched its file size
    // passed the size check. Counted in 128 bits (the layout of llmc/layout.h) and capped at 2^40 parameters.
    const unsigned __int128 L = c.num_layers, C = c.channels;
    const unsigned __int128 params = (unsigned __int128)c.padded_vocab_size * C + (unsigned __int128)c.max_seq_len * C +
                                     L * (12 * C * C + 13 * C) + 2 * C;
    if (params > ((unsigned __int128)1 << 40))
        fail("model config %s: %.3g parameters, more than the 2^40 this program handles", c.describe().c_str(),
             (double)params);
    if (c.padded_vocab_size < c.vocab_size)
        fail("model config %s: padded vocab %zu is smaller than the vocab %zu", c.describe().c_str(),
             c.padded_vocab_size, c.vocab_size);
    if (a.check_config) a.check_config(c);
}

// Parses an unsigned integer that must make up the whole string.
static bool parse_size(const std::string& s, size_t* out) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12) return false;
    *out = std::strtoull(s.c_str(), nullptr, 10);
    return true;
}

bool parse_model_descriptor(const std::string& spec, ModelConfig* out) {
    ModelConfig c;  // GPT-2 defaults: maxT 1024, V 50257
    size_t depth = 0;
    if (spec.size() > 1 && spec[0] == 'd' && parse_size(spec.substr(1), &depth)) {
        if (depth == 0) fail("model descriptor '%s': depth must be positive", spec.c_str());
        c.num_layers = depth;
        switch (depth) {  // the published GPT-2 sizes
            case 12: c.channels = 768; c.num_heads = 12; break;
            case 24: c.channels = 1024; c.num_heads = 16; break;
            case 36: c.channels = 1280; c.num_heads = 20; break;
            case 48: c.channels = 1600; c.num_heads = 25; break;
            default: c.channels = 64 * depth; c.num_heads = depth; break;
        }
    } else if (spec.find('=') != std::string::npos) {
        std::map<std::string, size_t*> keys = {{"L", &c.num_layers}, {"NH", &c.num_heads}, {"C", &c.channels},
                                               {"T", &c.max_seq_len}, {"V", &c.vocab_size}};
        std::stringstream ss(spec);
        std::string item;
        bool have_l = false, have_nh = false, have_c = false;
        while (std::getline(ss, item, ',')) {
            size_t eq = item.find('=');
            std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
            auto it = keys.find(key);
            size_t v = 0;
            if (it == keys.end())
                fail("model descriptor '%s': unknown key '%s' (expected L, NH, C, T, V)", spec.c_str(), key.c_str());
            if (!parse_size(val, &v) || v == 0)
                fail("model descriptor '%s': '%s' needs a positive integer, got '%s'", spec.c_str(), key.c_str(),
                     val.c_str());
            *it->second = v;
            have_l |= key == "L"; have_nh |= key == "NH"; have_c |= key == "C";
        }
        if (!have_l || !have_nh || !have_c)
            fail("model descriptor '%s': L, NH and C are required (e.g. L=6,NH=6,C=384)", spec.c_str());
    } else {
        return false;
    }
    c.padded_vocab_size = pad_vocab(c.vocab_size);
    validate_config(c);
    *out = c;
    return true;
}

}  // namespace llmc
