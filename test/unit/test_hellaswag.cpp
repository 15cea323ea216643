// HellaSwag evaluation (llmc/hellaswag.h): the file format round trip and its validation, and the accuracy of
// evaluate_hellaswag against an independent scoring of every completion (one forward per completion, log-softmax
// of the logits on the host). Labels are set from that independent scoring: the right one for the even examples,
// a wrong one for the odd ones, so the accuracy must be exactly 1/2, and any slip in which positions are scored,
// the batching (B = 3 < 4 completions), the padding or the left truncation of long contexts moves it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmc/comm.h"
#include "llmc/cpu/cpu_backend.h"
#include "llmc/hellaswag.h"
#include "llmc/model.h"
#include "llmc/rng.h"
#include "test/fixtures/hellaswag_fixture.h"
#include "test/fixtures/testing.h"

using namespace llmc;

static void expect_error(const std::string& name, const std::string& path, const std::string& want) {
    try {
        read_hellaswag(path);
        testing::check(name, false, "accepted");
    } catch (const Error& e) {
        testing::check(name, std::string(e.what()).find(want) != std::string::npos, "%s", e.what());
    }
}

int main() {
    try {
        const std::string dir = testing::tmp_dir("hellaswag");
        CpuBackend be;
        std::unique_ptr<Model<CpuBackend>> model_ptr = hellaswag_fixture::make_model(be);
        Model<CpuBackend>& model = *model_ptr;
        std::vector<McExample> ex = hellaswag_fixture::make_examples(model, 24);
        write_hellaswag(dir + "/eval.bin", ex);
        std::vector<McExample> back = read_hellaswag(dir + "/eval.bin");
        bool same = back.size() == ex.size();
        for (size_t i = 0; same && i < ex.size(); i++)
            same = back[i].index == ex[i].index && back[i].label == ex[i].label &&
                   back[i].context == ex[i].context && back[i].completions == ex[i].completions;
        testing::check("file round trip (magic 20240522, uint16 example streams)", same);

        std::unique_ptr<Comm> comm = make_single_comm();
        const double acc = evaluate_hellaswag(model, *comm, back);
        testing::check("accuracy is exactly 1/2 (labels from an independent scoring)", acc == 0.5, "acc %g", acc);

        // Malformed files: each refused with the file and what is wrong.
        FILE* f = std::fopen((dir + "/eval.bin").c_str(), "rb");
        std::vector<unsigned char> bytes;
        for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back((unsigned char)c);
        std::fclose(f);
        auto variant = [&](const std::string& name, auto mutate) {
            std::vector<unsigned char> b = bytes;
            mutate(b);
            FILE* g = std::fopen((dir + "/" + name).c_str(), "wb");
            std::fwrite(b.data(), 1, b.size(), g);
            std::fclose(g);
            return dir + "/" + name;
        };
        expect_error("bad magic refused", variant("magic.bin", [](auto& b) { b[0] ^= 1; }), "bad magic");
        expect_error("truncated file refused", variant("trunc.bin", [](auto& b) { b.resize(b.size() - 3); }),
                     "truncated inside example 23");
        expect_error("missing delimiter refused", variant("delim.bin", [](auto& b) { b[1024] = 0; }),
                     "does not start with the delimiter");
        expect_error("label out of range refused", variant("label.bin", [](auto& b) { b[1024 + 6] = 7; }),
                     "label 7");
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
