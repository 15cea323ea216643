// The CPU programs' thread choices (llmc/cpu/thread_policy.h): ./generate's default for small and large models.
#include "llmc/config.h"
#include "llmc/cpu/thread_policy.h"
#include "llmc/layout.h"
#include "test/fixtures/testing.h"

using namespace llmc;

// 2 x parameters x maxT: the FLOPs of generate's forward pass over a full context (generate.cpp computes it so).
static double forward_flops(const char* descriptor) {
    ModelConfig c;
    if (!parse_model_descriptor(descriptor, &c)) return -1;
    return 2.0 * (double)ParamLayout(c).total * (double)c.max_seq_len;
}

int main() {
    const double quickstart = forward_flops("L=4,NH=4,C=128,T=64,V=256"), d12 = forward_flops("d12");
    testing::check("the quickstart's byte-level model (0.1 GFLOP per forward pass) generates on one thread",
                   quickstart > 0 && generation_threads(quickstart) == 1, "%g FLOP: %d", quickstart,
                   generation_threads(quickstart));
    testing::check("GPT-2 124M (254 GFLOP per forward pass) generates on one thread per core",
                   generation_threads(d12) == 0, "%g FLOP: %d", d12, generation_threads(d12));
    testing::check("the boundary: 1 GFLOP per forward pass takes every core", generation_threads(1e9) == 0 &&
                   generation_threads(0.999e9) == 1, "");
    return testing::finish();
}
