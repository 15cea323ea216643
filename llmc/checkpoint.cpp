// Checkpoint files, metadata and retention (see checkpoint.h).
#include "checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "file_util.h"

namespace llmc {

// ---- CRC-32C ---------------------------------------------------------------------------------------------------
// Reflected polynomial 0x82F63B78. The table path handles a byte at a time from a 256-entry table; the SSE4.2 path
// uses the crc32 instruction on 8 bytes at a time (about 20x faster: checkpoints of the large models are tens of GB).

namespace {

struct Crc32cTable {
    uint32_t t[256];
    Crc32cTable() {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            t[i] = c;
        }
    }
};

uint32_t crc32c_table(uint32_t c, const unsigned char* p, size_t n) {
    static const Crc32cTable table;
    for (size_t i = 0; i < n; i++) c = table.t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t c, const unsigned char* p, size_t n) {
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
    }
    c = (uint32_t)c64;
    for (; n > 0; n--, p++) c = __builtin_ia32_crc32qi(c, *p);
    return c;
}
bool have_sse42() {
    static const bool yes = __builtin_cpu_supports("sse4.2");
    return yes;
}
#endif

const char* META_NAME = "meta.json";

std::string hex32(uint32_t x) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", x);
    return buf;
}

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
    uint32_t c = ~crc;
    const unsigned char* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
    if (have_sse42()) return ~crc32c_sse42(c, p, n);
#endif
    return ~crc32c_table(c, p, n);
}

uint32_t crc32c_file(const std::string& path, uint64_t* bytes) {
    FILE* f = open_or_fail(path, "rb");
    std::vector<unsigned char> buf(1 << 22);
    uint32_t crc = 0;
    uint64_t total = 0;
    size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
        crc = crc32c(crc, buf.data(), got);
        total += got;
    }
    bool err = std::ferror(f);
    std::fclose(f);
    if (err) fail("%s: read error (%s)", path.c_str(), std::strerror(errno));
    if (bytes) *bytes = total;
    return crc;
}

// ---- paths -----------------------------------------------------------------------------------------------------

std::string checkpoint_dir(const std::string& out_dir, int step) {
    char name[32];
    std::snprintf(name, sizeof name, "ckpt_%08d", step);
    return out_dir + "/" + name;
}

std::vector<int> list_checkpoint_steps(const std::string& out_dir) {
    std::vector<int> steps;
    DIR* d = opendir(out_dir.c_str());
    if (!d) return steps;
    while (dirent* e = readdir(d)) {
        const char* n = e->d_name;
        if (std::strncmp(n, "ckpt_", 5) != 0 || n[5] == 0) continue;
        bool digits = true;
        for (const char* c = n + 5; *c; c++) digits = digits && *c >= '0' && *c <= '9';
        if (!digits || std::strlen(n + 5) > 9) continue;
        struct stat st;
        if (stat((out_dir + "/" + n).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) steps.push_back(std::atoi(n + 5));
    }
    closedir(d);
    std::sort(steps.begin(), steps.end());
    return steps;
}

bool checkpoint_complete(const std::string& dir) {
    struct stat st;
    return stat((dir + "/" + META_NAME).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

static void fsync_dir(const std::string& dir) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static std::string parent_of(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

void make_checkpoint_directory(const std::string& dir) {
    std::string path;
    for (size_t i = 0; i <= dir.size(); i++) {
        if ((i == dir.size() || dir[i] == '/') && !path.empty() && mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
            fail("%s: cannot create directory (%s)", path.c_str(), std::strerror(errno));
        if (i < dir.size()) path += dir[i];
    }
    fsync_dir(parent_of(dir));
}

// ---- metadata --------------------------------------------------------------------------------------------------

nlohmann::json meta_to_json(const CheckpointMeta& m) {
    nlohmann::json files = nlohmann::json::array();
    for (const CheckpointFileInfo& f : m.files) {
        nlohmann::json jf = {{"name", f.name}, {"bytes", f.bytes}, {"crc32c", hex32(f.crc32c)}};
        if (f.name != "model.bin") jf["begin"] = f.begin, jf["end"] = f.end;
        files.push_back(jf);
    }
    const GPT2Config& c = m.config;
    return {
        {"format", "llmc checkpoint"},
        {"version", CHECKPOINT_META_VERSION},
        {"step", m.step},
        {"model", {{"max_seq_len", c.max_seq_len}, {"vocab_size", c.vocab_size},
                   {"padded_vocab_size", c.padded_vocab_size}, {"num_layers", c.num_layers},
                   {"num_heads", c.num_heads}, {"channels", c.channels}}},
        {"num_params", m.num_params},
        {"world_size", m.world_size},
        {"zero_stage", m.zero_stage},
        {"must_match", {{"batch_size", m.batch_size}, {"seq_len", m.seq_len}, {"total_batch", m.total_batch},
                        {"seed", m.seed}, {"shuffle", m.shuffle}, {"overfit", m.overfit}}},
        {"max_steps", m.max_steps},
        {"data", {{"epoch", m.data.epoch}, {"shard", m.data.shard}, {"sequence", m.data.sequence},
                  {"micro_step", m.data.micro_step}}},
        {"guard", m.guard},
        {"metrics_bytes", m.metrics_bytes},
        {"files", files},
    };
}

CheckpointMeta meta_from_json(const nlohmann::json& j, const std::string& path) {
    CheckpointMeta m;
    try {
        if (j.at("format").get<std::string>() != "llmc checkpoint")
            fail("%s: not a checkpoint metadata file (format '%s')", path.c_str(),
                 j.at("format").get<std::string>().c_str());
        int version = j.at("version").get<int>();
        if (version != CHECKPOINT_META_VERSION)
            fail("%s: metadata version %d, this program reads version %d", path.c_str(), version,
                 CHECKPOINT_META_VERSION);
        m.step = j.at("step").get<int>();
        const nlohmann::json& c = j.at("model");
        m.config.max_seq_len = c.at("max_seq_len").get<size_t>();
        m.config.vocab_size = c.at("vocab_size").get<size_t>();
        m.config.padded_vocab_size = c.at("padded_vocab_size").get<size_t>();
        m.config.num_layers = c.at("num_layers").get<size_t>();
        m.config.num_heads = c.at("num_heads").get<size_t>();
        m.config.channels = c.at("channels").get<size_t>();
        m.num_params = j.at("num_params").get<uint64_t>();
        m.world_size = j.at("world_size").get<int>();
        m.zero_stage = j.at("zero_stage").get<int>();
        const nlohmann::json& mm = j.at("must_match");
        m.batch_size = mm.at("batch_size").get<long long>();
        m.seq_len = mm.at("seq_len").get<long long>();
        m.total_batch = mm.at("total_batch").get<long long>();
        m.seed = mm.at("seed").get<uint64_t>();
        m.shuffle = mm.at("shuffle").get<bool>();
        m.overfit = mm.at("overfit").get<bool>();
        m.max_steps = j.at("max_steps").get<int>();
        const nlohmann::json& d = j.at("data");
        m.data.epoch = d.at("epoch").get<uint64_t>();
        m.data.shard = d.at("shard").get<uint64_t>();
        m.data.sequence = d.at("sequence").get<uint64_t>();
        m.data.micro_step = d.at("micro_step").get<uint64_t>();
        m.guard = j.at("guard");
        m.metrics_bytes = j.at("metrics_bytes").get<int64_t>();
        for (const nlohmann::json& jf : j.at("files")) {
            CheckpointFileInfo f;
            f.name = jf.at("name").get<std::string>();
            if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.')
                fail("%s: bad file name '%s'", path.c_str(), f.name.c_str());
            f.bytes = jf.at("bytes").get<uint64_t>();
            std::string crc = jf.at("crc32c").get<std::string>();
            char* end = nullptr;
            unsigned long v = std::strtoul(crc.c_str(), &end, 16);
            if (crc.size() != 8 || *end != 0) fail("%s: bad crc32c '%s' for %s", path.c_str(), crc.c_str(), f.name.c_str());
            f.crc32c = (uint32_t)v;
            if (jf.contains("begin")) f.begin = jf.at("begin").get<uint64_t>(), f.end = jf.at("end").get<uint64_t>();
            m.files.push_back(f);
        }
    } catch (const nlohmann::json::exception& e) {
        fail("%s: malformed checkpoint metadata (%s)", path.c_str(), e.what());
    }
    if (m.files.size() < 2 || m.files[0].name != "model.bin")
        fail("%s: expected model.bin and at least one optimizer file in \"files\"", path.c_str());
    // The optimizer files must tile [0, num_params) in order.
    uint64_t next = 0;
    for (size_t i = 1; i < m.files.size(); i++) {
        const CheckpointFileInfo& f = m.files[i];
        if (f.begin != next || f.end < f.begin || f.end > m.num_params)
            fail("%s: optimizer file %s covers [%llu, %llu), expected to start at %llu (of %llu)", path.c_str(),
                 f.name.c_str(), (unsigned long long)f.begin, (unsigned long long)f.end, (unsigned long long)next,
                 (unsigned long long)m.num_params);
        next = f.end;
    }
    if (next != m.num_params)
        fail("%s: the optimizer files cover %llu of %llu parameters", path.c_str(), (unsigned long long)next,
             (unsigned long long)m.num_params);
    return m;
}

CheckpointMeta read_checkpoint_meta(const std::string& dir) {
    const std::string path = dir + "/" + META_NAME;
    FILE* f = open_or_fail(path, "rb");
    std::string text;
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
    std::fclose(f);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) fail("%s: not valid JSON (truncated or corrupted)", path.c_str());
    return meta_from_json(j, path);
}

void write_checkpoint_meta(const std::string& dir, const CheckpointMeta& m) {
    const std::string text = meta_to_json(m).dump(2) + "\n";
    const std::string path = dir + "/" + META_NAME;
    write_atomically(path, [&](FILE* f) { write_exact(f, text.data(), text.size(), path); });
}

std::string verify_checkpoint_file(const std::string& dir, const CheckpointFileInfo& f) {
    const std::string path = dir + "/" + f.name;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return path + ": missing (" + std::strerror(errno) + ")";
    if ((uint64_t)st.st_size != f.bytes)
        return path + ": " + std::to_string(st.st_size) + " bytes, meta.json records " + std::to_string(f.bytes) +
               " (truncated or overwritten)";
    uint64_t bytes = 0;
    uint32_t crc = crc32c_file(path, &bytes);
    if (crc != f.crc32c)
        return path + ": checksum mismatch: crc32c " + hex32(crc) + " computed, " + hex32(f.crc32c) +
               " recorded in meta.json (the file is corrupted)";
    return "";
}

void check_resume_compatible(const CheckpointMeta& s, const CheckpointMeta& n, const std::string& dir) {
    if (!(s.config == n.config))
        fail("%s: written for model %s, this run has %s (-e)", dir.c_str(), s.config.describe().c_str(),
             n.config.describe().c_str());
    auto same = [&](const char* flag, long long a, long long b) {
        if (a != b)
            fail("%s: written with %s %lld, this run has %s %lld; resume with the same value", dir.c_str(), flag, a,
                 flag, b);
    };
    same("-b", s.batch_size, n.batch_size);
    same("-t", s.seq_len, n.seq_len);
    same("-d", s.total_batch, n.total_batch);
    same("--seed", (long long)s.seed, (long long)n.seed);
    same("--shuffle", s.shuffle, n.shuffle);
    same("-a", s.overfit, n.overfit);
}

// ---- optimizer-state files -------------------------------------------------------------------------------------
// Header (256 x int32, little-endian): [0] magic 20241106, [1] version 1, [2] step, [3] reserved,
// [4..5] num_params, [6..7] begin, [8..9] end (uint64 each, low word first); then m, v, master, (end - begin) fp32
// values each.

namespace {

constexpr size_t HEADER_INTS = 256, HEADER_BYTES = HEADER_INTS * 4;

void put_u64(int32_t* h, uint64_t x) { std::memcpy(h, &x, 8); }
uint64_t get_u64(const int32_t* h) {
    uint64_t x;
    std::memcpy(&x, h, 8);
    return x;
}

}  // namespace

void checkpoint_test_hook(int step) {
    const char* s = std::getenv("LLMC_TEST_CRASH_IN_CHECKPOINT");
    if (s && std::atoi(s) == step) {
        std::fprintf(stderr, "LLMC_TEST_CRASH_IN_CHECKPOINT: killing myself inside checkpoint %d\n", step);
        raise(SIGKILL);
    }
}

CheckpointFileInfo write_optim_state(const std::string& dir, const std::string& name, int step, uint64_t num_params,
                                     uint64_t begin, uint64_t end,
                                     const std::function<void(int, uint64_t, size_t, float*)>& fetch) {
    CheckpointFileInfo info;
    info.name = name, info.begin = begin, info.end = end;
    const std::string path = dir + "/" + name;
    write_atomically(path, [&](FILE* f) {
        int32_t h[HEADER_INTS] = {};
        h[0] = OPTIM_STATE_MAGIC, h[1] = OPTIM_STATE_VERSION, h[2] = step;
        put_u64(h + 4, num_params), put_u64(h + 6, begin), put_u64(h + 8, end);
        uint32_t crc = crc32c(0, h, HEADER_BYTES);
        write_exact(f, h, HEADER_BYTES, path);
        const size_t chunk = (size_t)1 << 22;
        std::vector<float> buf(std::min<uint64_t>(chunk, end - begin));
        for (int which = 0; which < 3; which++)
            for (uint64_t off = 0; off < end - begin; off += chunk) {
                const size_t n = (size_t)std::min<uint64_t>(chunk, end - begin - off);
                fetch(which, off, n, buf.data());
                crc = crc32c(crc, buf.data(), n * sizeof(float));
                write_exact(f, buf.data(), n * sizeof(float), path);
            }
        info.crc32c = crc;
        info.bytes = HEADER_BYTES + 3 * (end - begin) * sizeof(float);
        std::fflush(f);
        checkpoint_test_hook(step);
    });
    return info;
}

void read_optim_state(const std::string& dir, const CheckpointMeta& meta, int which, uint64_t lo, uint64_t hi,
                      float* dst) {
    for (size_t i = 1; i < meta.files.size(); i++) {
        const CheckpointFileInfo& fi = meta.files[i];
        const uint64_t a = std::max(lo, fi.begin), b = std::min(hi, fi.end);
        if (a >= b) continue;
        const std::string path = dir + "/" + fi.name;
        FILE* f = open_or_fail(path, "rb");
        int32_t h[HEADER_INTS];
        try {
            read_exact(f, h, HEADER_BYTES, path);
            if (h[0] != OPTIM_STATE_MAGIC)
                fail("%s: bad magic %d (expected %d: an optimizer-state file)", path.c_str(), h[0], OPTIM_STATE_MAGIC);
            if (h[1] != OPTIM_STATE_VERSION)
                fail("%s: version %d, expected %d", path.c_str(), h[1], OPTIM_STATE_VERSION);
            if (h[2] != meta.step || get_u64(h + 4) != meta.num_params || get_u64(h + 6) != fi.begin ||
                get_u64(h + 8) != fi.end)
                fail("%s: header says step %d, %llu parameters, range [%llu, %llu); meta.json says step %d, %llu, "
                     "[%llu, %llu)",
                     path.c_str(), h[2], (unsigned long long)get_u64(h + 4), (unsigned long long)get_u64(h + 6),
                     (unsigned long long)get_u64(h + 8), meta.step, (unsigned long long)meta.num_params,
                     (unsigned long long)fi.begin, (unsigned long long)fi.end);
            const uint64_t n = fi.end - fi.begin;
            const uint64_t offset = HEADER_BYTES + ((uint64_t)which * n + (a - fi.begin)) * sizeof(float);
            if (fseeko(f, (off_t)offset, SEEK_SET) != 0) fail("%s: cannot seek (%s)", path.c_str(), std::strerror(errno));
            read_exact(f, dst + (a - lo), (b - a) * sizeof(float), path);
        } catch (...) {
            std::fclose(f);
            throw;
        }
        std::fclose(f);
    }
}

// ---- retention -------------------------------------------------------------------------------------------------

void remove_checkpoint(const std::string& dir) {
    std::remove((dir + "/" + META_NAME).c_str());
    fsync_dir(dir);
    if (DIR* d = opendir(dir.c_str())) {
        std::vector<std::string> names;
        while (dirent* e = readdir(d))
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
        closedir(d);
        for (const std::string& n : names) std::remove((dir + "/" + n).c_str());
    }
    rmdir(dir.c_str());
}

void apply_retention(const std::string& out_dir, int keep_last, int keep_every, int newest) {
    std::vector<int> steps = list_checkpoint_steps(out_dir);
    int complete_seen = 0;
    for (size_t i = steps.size(); i-- > 0;) {
        const int s = steps[i];
        const std::string dir = checkpoint_dir(out_dir, s);
        if (s > newest) continue;  // left by a run that got further before a crash: rewritten when reached
        if (!checkpoint_complete(dir)) {
            if (s < newest) remove_checkpoint(dir);
            continue;
        }
        complete_seen++;
        const bool keep = keep_last == 0 || complete_seen <= keep_last || (keep_every > 0 && s % keep_every == 0);
        if (!keep) remove_checkpoint(dir);
    }
}

void truncate_metrics(const std::string& path, int64_t bytes) {
    struct stat st;
    if (bytes < 0 || stat(path.c_str(), &st) != 0 || st.st_size <= bytes) return;
    if (truncate(path.c_str(), (off_t)bytes) != 0)
        fail("%s: cannot truncate to %lld bytes (%s)", path.c_str(), (long long)bytes, std::strerror(errno));
}

}  // namespace llmc
