// HellaSwag files (see hellaswag.h).
#include "hellaswag.h"

#include <cstdint>
#include <cstdio>

#include "file_util.h"

namespace llmc {

std::vector<McExample> read_hellaswag(const std::string& path) {
    const size_t size = file_size_or_fail(path);
    if (size < 1024) fail("%s: %zu bytes, too short for the 1024-byte header of a HellaSwag file", path.c_str(), size);
    FILE* f = open_or_fail(path, "rb");
    int32_t h[256];
    std::vector<uint16_t> data((size - 1024) / 2);
    try {
        read_exact(f, h, sizeof h, path);
        read_exact(f, data.data(), data.size() * 2, path);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
    if (h[0] != HELLASWAG_MAGIC) fail("%s: bad magic %d (expected %d: a HellaSwag eval file)", path.c_str(), h[0], HELLASWAG_MAGIC);
    if (h[1] != HELLASWAG_VERSION) fail("%s: version %d, expected %d", path.c_str(), h[1], HELLASWAG_VERSION);
    if (h[2] < 0) fail("%s: negative example count %d", path.c_str(), h[2]);
    std::vector<McExample> out;
    size_t p = 0;
    for (int e = 0; e < h[2]; e++) {
        auto need = [&](size_t n) {
            if (p + n > data.size()) fail("%s: truncated inside example %d", path.c_str(), e);
        };
        need(6);
        const size_t start = p;
        if (data[p] != 65535) fail("%s: example %d does not start with the delimiter 65535 (got %u)", path.c_str(), e, data[p]);
        const size_t bytes = data[p + 1];
        McExample ex;
        ex.index = data[p + 2], ex.label = data[p + 3];
        const size_t nc = data[p + 4], nctx = data[p + 5];
        p += 6;
        if (nc < 2 || ex.label >= (int)nc)
            fail("%s: example %d has %zu completions and label %d", path.c_str(), e, nc, ex.label);
        need(nctx);
        ex.context.assign(data.begin() + p, data.begin() + p + nctx);
        p += nctx;
        for (size_t c = 0; c < nc; c++) {
            need(1);
            const size_t n = data[p++];
            if (n == 0) fail("%s: example %d, completion %zu is empty", path.c_str(), e, c);
            need(n);
            ex.completions.emplace_back(data.begin() + p, data.begin() + p + n);
            p += n;
        }
        if ((p - start) * 2 != bytes)
            fail("%s: example %d is %zu bytes, its header says %zu", path.c_str(), e, (p - start) * 2, bytes);
        if (ex.context.empty()) fail("%s: example %d has an empty context", path.c_str(), e);
        out.push_back(std::move(ex));
    }
    if (p != data.size()) fail("%s: %zu bytes after the last of %d examples", path.c_str(), (data.size() - p) * 2, h[2]);
    return out;
}

void write_hellaswag(const std::string& path, const std::vector<McExample>& examples) {
    std::vector<uint16_t> data;
    size_t longest = 0;
    for (const McExample& ex : examples) {
        const size_t start = data.size();
        data.insert(data.end(), {65535, 0, (uint16_t)ex.index, (uint16_t)ex.label, (uint16_t)ex.completions.size(),
                                 (uint16_t)ex.context.size()});
        data.insert(data.end(), ex.context.begin(), ex.context.end());
        for (const std::vector<int>& c : ex.completions) {
            data.push_back((uint16_t)c.size());
            data.insert(data.end(), c.begin(), c.end());
        }
        const size_t bytes = (data.size() - start) * 2;
        if (bytes > 65535) fail("write_hellaswag: example %d is %zu bytes (at most 65535)", ex.index, bytes);
        data[start + 1] = (uint16_t)bytes;
        longest = std::max(longest, bytes);
    }
    int32_t h[256] = {};
    h[0] = HELLASWAG_MAGIC, h[1] = HELLASWAG_VERSION, h[2] = (int32_t)examples.size(), h[3] = (int32_t)longest;
    write_atomically(path, [&](FILE* f) {
        write_exact(f, h, sizeof h, path);
        write_exact(f, data.data(), data.size() * 2, path);
    });
}

size_t hellaswag_row(const McExample& ex, size_t completion, size_t T, std::vector<int>* inputs,
                     std::vector<int>* targets, size_t* first_scored) {
    const std::vector<int>& comp = ex.completions[completion];
    if (comp.size() > T) fail("HellaSwag example %d: a completion of %zu tokens does not fit T = %zu", ex.index, comp.size(), T);
    // Keep the whole completion and as much of the context as fits in T + 1 tokens (at least one).
    const size_t keep_ctx = std::min(ex.context.size(), T + 1 - comp.size());
    std::vector<int> seq(ex.context.end() - (std::ptrdiff_t)keep_ctx, ex.context.end());
    seq.insert(seq.end(), comp.begin(), comp.end());
    const size_t len = seq.size() - 1;
    inputs->assign(seq.begin(), seq.end() - 1);
    targets->assign(seq.begin() + 1, seq.end());
    *first_scored = keep_ctx - 1;  // the position whose target is the completion's first token
    return len;
}

}  // namespace llmc
