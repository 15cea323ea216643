// Host-side pieces of the trainer that need no backend: the FLOP count behind MFU, the -b values a -d allows, and
// the model-file reader's refusal of non-finite parameters.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "llmc/config.h"
#include "llmc/error.h"
#include "llmc/layout.h"
#include "llmc/model_file.h"
#include "llmc/trainer.h"
#include "test/fixtures/testing.h"

using namespace llmc;

int main() {
    // MFU's FLOPs per token, llm.c's formula: 6 N + 6 L C T with N every parameter. GPT-2 124M (d12, Vp = 50304) at
    // T = 1024 is 6 * 124,475,904 + 6 * 12 * 768 * 1024 = 803,478,528. Every term is an integer below 2^53: exact in
    // double.
    ModelConfig d12;
    parse_model_descriptor("d12", &d12);
    const size_t n12 = ParamLayout(d12).total;
    testing::check("d12 has 124,475,904 parameters", n12 == 124475904ull, "got %zu", n12);
    const double f12 = flops_per_token(d12, n12, 1024);
    testing::check("d12 at T=1024: 803,478,528 FLOPs per token (6 N + 6 L C T)", f12 == 803478528.0, "got %.0f", f12);
    // The attention term scales with T, the parameter term does not.
    testing::check("T=512 removes half the attention term",
                   flops_per_token(d12, n12, 512) == f12 - 3.0 * 12 * 768 * 1024, "got %.0f",
                   flops_per_token(d12, n12, 512));
    const std::string header = describe_flops_per_token(d12, n12, 1024);
    testing::check("the log header states the formula and the figure",
                   header == "MFU counts 6 N + 6 L C T = 803.5 MFLOP per token (llm.c's formula: N = 124475904 "
                             "parameters, causal attention)",
                   "%s", header.c_str());

    // A -d that does not split into micro-steps: the message names the -b values that do.
    testing::check("-d 524288 on 8 ranks: -b 64 .. 1 work",
                   batch_size_advice(524288, 1024, 8) ==
                       "-b values that work with -t 1024 on 8 rank(s): 64, 32, 16, 8, 4, 2, 1",
                   "%s", batch_size_advice(524288, 1024, 8).c_str());
    testing::check("-d 524288 on 6 ranks: no -b works",
                   batch_size_advice(524288, 1024, 6) == "no -b works: -d must be a multiple of -t x ranks = 1024 x 6 = 6144");
    testing::check("many divisors: the 12 largest, then ...",
                   batch_size_advice(720 * 4, 4, 1) ==
                       "-b values that work with -t 4 on 1 rank(s): 720, 360, 240, 180, 144, 120, 90, 80, 72, 60, 48, 45, ...",
                   "%s", batch_size_advice(720 * 4, 4, 1).c_str());

    // A model file holding a NaN or an infinity is refused when read, naming the tensor and the element.
    const std::string dir = testing::tmp_dir("trainer_host");
    ModelConfig c;
    parse_model_descriptor("L=2,NH=2,C=8,T=4,V=16", &c);
    const ParamLayout lay(c);
    std::vector<float> p(lay.total, 0.5f);
    write_model_file(dir + "/ok.bin", c, p.data(), false);
    testing::check("a finite model file reads back", read_model_file(dir + "/ok.bin").params == p);
    p[lay.offsets[QKVW] + 3] = std::numeric_limits<float>::quiet_NaN();
    write_model_file(dir + "/nan.bin", c, p.data(), false);
    testing::check("a NaN parameter is refused, naming the tensor and element",
                   testing::throws_with([&] { read_model_file(dir + "/nan.bin"); }, "(qkvw, element 3) is nan"));
    p[lay.offsets[QKVW] + 3] = 0.5f;
    p[lay.offsets[LNFB]] = INFINITY;
    write_model_file(dir + "/inf.bin", c, p.data(), true);
    testing::check("an infinite parameter in a bf16 file is refused",
                   testing::throws_with([&] { read_model_file(dir + "/inf.bin"); }, "(lnfb, element 0) is inf"));
    return testing::finish();
}
