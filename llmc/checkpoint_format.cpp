// Checkpoint files: meta.json and the optimizer-state files, written, read and verified (see checkpoint_format.h).
#include "checkpoint_format.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "crc32c.h"
#include "file_util.h"
#include "layout.h"
#include "model_file.h"

namespace llmc {

namespace {

std::string hex32(uint32_t x) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", x);
    return buf;
}

}  // namespace

// ---- metadata --------------------------------------------------------------------------------------------------
// meta.json carries its own checksum: "meta_crc32c" is the CRC-32C of the file's bytes with that value written as
// "00000000". The reader checks the bytes as they are on disk (no re-serialisation), then every field's JSON type
// and range; the checks against the run (data position, metrics.jsonl, ...) are the trainer's (trainer_resume.h).

namespace {

constexpr const char* CRC_KEY = "meta_crc32c";
constexpr const char* CRC_PLACEHOLDER = "00000000";
constexpr size_t OPTIM_HEADER_BYTES = 256 * 4;

// A JSON value for a message: its text, shortened.
std::string shown(const nlohmann::json& v) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// Strict field readers: `obj[key]` must exist and have the right JSON type and range; `name` is the field's full
// name in messages ("data.sequence"). Integers are compared as 128-bit values, so -4 is never read as 2^64 - 4.
const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& name,
                            const std::string& path) {
    if (!obj.is_object() || !obj.contains(key)) fail("%s: field \"%s\" is missing", path.c_str(), name.c_str());
    return obj.at(key);
}
__int128 int_field(const nlohmann::json& obj, const char* key, const std::string& name, __int128 lo, __int128 hi,
                   const std::string& path) {
    const nlohmann::json& v = field(obj, key, name, path);
    if (!v.is_number_integer())
        fail("%s: field \"%s\" is %s, expected an integer", path.c_str(), name.c_str(), shown(v).c_str());
    const __int128 x = v.is_number_unsigned() ? (__int128)v.get<uint64_t>() : (__int128)v.get<int64_t>();
    if (x < lo || x > hi)
        fail("%s: field \"%s\" is %s, expected %lld .. %llu", path.c_str(), name.c_str(), shown(v).c_str(),
             (long long)lo, (unsigned long long)hi);
    return x;
}
bool bool_field(const nlohmann::json& obj, const char* key, const std::string& name, const std::string& path) {
    const nlohmann::json& v = field(obj, key, name, path);
    if (!v.is_boolean()) fail("%s: field \"%s\" is %s, expected true or false", path.c_str(), name.c_str(), shown(v).c_str());
    return v.get<bool>();
}
std::string string_field(const nlohmann::json& obj, const char* key, const std::string& name, const std::string& path) {
    const nlohmann::json& v = field(obj, key, name, path);
    if (!v.is_string()) fail("%s: field \"%s\" is %s, expected a string", path.c_str(), name.c_str(), shown(v).c_str());
    return v.get<std::string>();
}
uint32_t hex_field(const nlohmann::json& obj, const char* key, const std::string& name, const std::string& path) {
    const std::string s = string_field(obj, key, name, path);
    if (s.size() != 8 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
        fail("%s: field \"%s\" is \"%s\", expected 8 lowercase hex digits", path.c_str(), name.c_str(), s.c_str());
    return (uint32_t)std::strtoul(s.c_str(), nullptr, 16);
}

constexpr __int128 U64_MAX = (__int128)UINT64_MAX, I32_MAX = INT32_MAX, LIMIT = (__int128)1 << 62;

// The offset of the checksum's 8 hex digits in `text` (the value of the "meta_crc32c" key), or npos.
size_t crc_value_offset(const std::string& text, const std::string& value) {
    const size_t key = text.find(std::string("\"") + CRC_KEY + "\"");
    if (key == std::string::npos) return std::string::npos;
    const size_t v = text.find("\"" + value + "\"", key + std::strlen(CRC_KEY) + 2);
    return v == std::string::npos ? v : v + 1;
}

}  // namespace

nlohmann::json meta_to_json(const CheckpointMeta& m) {
    nlohmann::json files = nlohmann::json::array();
    for (const CheckpointFileInfo& f : m.files) {
        nlohmann::json jf = {{"name", f.name}, {"bytes", f.bytes}, {"crc32c", hex32(f.crc32c)}};
        if (f.name != "model.bin") jf["begin"] = f.begin, jf["end"] = f.end;
        files.push_back(jf);
    }
    const ModelConfig& c = m.config;
    nlohmann::json j = {
        {"format", "llmc checkpoint"},
        {"version", m.sync.every == 0          ? CHECKPOINT_META_VERSION
                    : m.sync.shard_group == 1 ? CHECKPOINT_META_VERSION_SYNC
                                              : CHECKPOINT_META_VERSION_SYNC_SHARDED},
        {CRC_KEY, CRC_PLACEHOLDER},
        {"step", m.step},
        {"model", {{"max_seq_len", c.max_seq_len}, {"vocab_size", c.vocab_size},
                   {"padded_vocab_size", c.padded_vocab_size}, {"num_layers", c.num_layers},
                   {"num_heads", c.num_heads}, {"channels", c.channels}}},
        {"num_params", m.num_params},
        {"world_size", m.world_size},
        {"zero_stage", m.zero_stage},
        {"must_match", {{"batch_size", m.batch_size}, {"seq_len", m.seq_len}, {"total_batch", m.total_batch},
                        {"seed", m.seed}, {"shuffle", m.shuffle}, {"overfit", m.overfit}}},
        {"train_data", {{"shards", m.train_data.shards}, {"tokens", m.train_data.tokens},
                        {"digest", hex32(m.train_data.digest)}, {"content", hex32(m.train_data.content)}}},
        {"max_steps", m.max_steps},
        {"data", {{"epoch", m.data.epoch}, {"shard", m.data.shard}, {"sequence", m.data.sequence},
                  {"micro_step", m.data.micro_step}}},
        {"guard", m.guard},
        {"metrics_bytes", m.metrics_bytes},
        {"files", files},
    };
    if (c.arch != "gpt2") j["model"]["arch"] = c.arch;  // GPT-2's checkpoints stay as they were
    if (c.arch_flags) j["model"]["arch_flags"] = c.arch_flags;
    if (m.sync.every > 0)
        j["sync"] = {{"every", m.sync.every}, {"outer_lr", m.sync.outer_lr}, {"outer_momentum", m.sync.outer_momentum},
                     {"last_sync_step", m.sync.last_sync_step}};
    if (m.sync.every > 0 && m.sync.shard_group > 1) j["sync"]["shard_group"] = m.sync.shard_group;
    return j;
}

namespace {

// The parts of meta_from_json, in the order the file is checked (the first problem is the one reported).
ModelConfig model_from_json(const nlohmann::json& j, const std::string& path) {
    const nlohmann::json& c = field(j, "model", "model", path);
    const __int128 dim = (__int128)1 << 24;
    ModelConfig cfg;
    if (c.is_object() && c.contains("arch")) cfg.arch = string_field(c, "arch", "model.arch", path);
    if (c.is_object() && c.contains("arch_flags"))
        cfg.arch_flags = (unsigned)int_field(c, "arch_flags", "model.arch_flags", 0, 1 << 30, path);
    cfg.max_seq_len = (size_t)int_field(c, "max_seq_len", "model.max_seq_len", 1, dim, path);
    cfg.vocab_size = (size_t)int_field(c, "vocab_size", "model.vocab_size", 1, dim, path);
    cfg.padded_vocab_size = (size_t)int_field(c, "padded_vocab_size", "model.padded_vocab_size", 1, dim, path);
    cfg.num_layers = (size_t)int_field(c, "num_layers", "model.num_layers", 1, 4096, path);
    cfg.num_heads = (size_t)int_field(c, "num_heads", "model.num_heads", 1, dim, path);
    cfg.channels = (size_t)int_field(c, "channels", "model.channels", 1, dim, path);
    try {
        validate_config(cfg);
    } catch (const Error& e) {
        fail("%s: field \"model\": %s", path.c_str(), e.what());
    }
    return cfg;
}

void must_match_from_json(const nlohmann::json& j, const std::string& path, CheckpointMeta* m) {
    const nlohmann::json& mm = field(j, "must_match", "must_match", path);
    m->batch_size = (long long)int_field(mm, "batch_size", "must_match.batch_size", 1, I32_MAX, path);
    m->seq_len = (long long)int_field(mm, "seq_len", "must_match.seq_len", 1, I32_MAX, path);
    m->total_batch = (long long)int_field(mm, "total_batch", "must_match.total_batch", 1, LIMIT, path);
    m->seed = (uint64_t)int_field(mm, "seed", "must_match.seed", 0, U64_MAX, path);
    m->shuffle = bool_field(mm, "shuffle", "must_match.shuffle", path);
    m->overfit = bool_field(mm, "overfit", "must_match.overfit", path);
    const nlohmann::json& td = field(j, "train_data", "train_data", path);
    m->train_data.shards = (uint64_t)int_field(td, "shards", "train_data.shards", 1, LIMIT, path);
    m->train_data.tokens = (uint64_t)int_field(td, "tokens", "train_data.tokens", 1, LIMIT, path);
    m->train_data.digest = hex_field(td, "digest", "train_data.digest", path);
    m->train_data.content = hex_field(td, "content", "train_data.content", path);
}

LoaderPosition position_from_json(const nlohmann::json& j, const std::string& path) {
    const nlohmann::json& d = field(j, "data", "data", path);
    LoaderPosition p;
    p.epoch = (uint64_t)int_field(d, "epoch", "data.epoch", 0, U64_MAX, path);
    p.shard = (uint64_t)int_field(d, "shard", "data.shard", 0, U64_MAX, path);
    p.sequence = (uint64_t)int_field(d, "sequence", "data.sequence", 0, U64_MAX, path);
    // Checkpoints are written between steps.
    p.micro_step = (uint64_t)int_field(d, "micro_step", "data.micro_step", 0, 0, path);
    return p;
}

// The name entry i of "files" must have: model.bin (i = 0), then optim_<i - 1>.bin; with --sync-every the
// replica files, replica by replica and shard by shard, then the outer files (sync_file_index()).
std::string expected_file_name(size_t i, const CheckpointMeta& m) {
    char want[32];
    if (i == 0) return "model.bin";
    if (m.sync.every == 0) {
        std::snprintf(want, sizeof want, "optim_%05zu.bin", i - 1);
        return want;
    }
    const int n = m.sync.shard_group;
    if (i > (size_t)m.world_size) return outer_file_name((int)(i - 1 - (size_t)m.world_size), n);
    return replica_file_name((int)((i - 1) / (size_t)n), (int)((i - 1) % (size_t)n), n);
}

// The files that tile [0, num_params) together, in order: every optimizer file; with --sync-every, the N files of
// each replica, and the N outer files (N = ranks per replica).
size_t tile_size(const CheckpointMeta& m) {
    return m.sync.every > 0 ? (size_t)m.sync.shard_group : (size_t)m.world_size;
}

// Entry i of "files": model.bin (i = 0), else a state file whose range starts where the previous file of its tile
// ended (tile_size(): the optimizer files, a replica's files, the outer files).
CheckpointFileInfo file_from_json(const nlohmann::json& jf, size_t i, const CheckpointMeta& m,
                                  const std::string& path) {
    const std::string at = "files[" + std::to_string(i) + "]";
    CheckpointFileInfo f;
    const std::string want = expected_file_name(i, m);
    f.name = string_field(jf, "name", at + ".name", path);
    if (f.name != want) fail("%s: field \"%s.name\" is \"%s\", expected \"%s\"", path.c_str(), at.c_str(),
                             f.name.c_str(), want.c_str());
    f.bytes = (uint64_t)int_field(jf, "bytes", at + ".bytes", 0, LIMIT, path);
    f.crc32c = hex_field(jf, "crc32c", at + ".crc32c", path);
    uint64_t expected_bytes = 256 * 4 + 4 * m.num_params;  // model.bin, fp32
    if (i > 0) {
        f.begin = (uint64_t)int_field(jf, "begin", at + ".begin", 0, LIMIT, path);
        f.end = (uint64_t)int_field(jf, "end", at + ".end", 0, LIMIT, path);
        // Each tile's files follow each other in order (so no range below wraps around); tiles_cover() checks that
        // the last one ends at num_params. A shard made only of padding has the empty range [num_params,
        // num_params) (ShardPlan::logical_begin); earlier writers recorded it as empty at the shard's start, past
        // num_params, once the previous files had reached num_params: read as that same empty range.
        const uint64_t next = (i - 1) % tile_size(m) == 0 ? 0 : std::min(m.files.back().end, m.num_params);
        const bool padding_only = f.begin == f.end && f.begin > m.num_params && next == m.num_params;
        if (!padding_only && (f.begin != next || f.end < f.begin || f.end > m.num_params))
            fail("%s: %s covers [%llu, %llu), expected a range starting at %llu within %llu parameters",
                 path.c_str(), f.name.c_str(), (unsigned long long)f.begin, (unsigned long long)f.end,
                 (unsigned long long)next, (unsigned long long)m.num_params);
        expected_bytes = OPTIM_HEADER_BYTES + (uint64_t)state_file_arrays(f.name) * 4 * (f.end - f.begin);
    }
    if (f.bytes != expected_bytes)
        fail("%s: field \"%s.bytes\" is %llu, expected %llu for %s", path.c_str(), at.c_str(),
             (unsigned long long)f.bytes, (unsigned long long)expected_bytes, f.name.c_str());
    return f;
}

// Every tile of files (tile_size()) ends at num_params.
void check_tiles_cover(const CheckpointMeta& m, const std::string& path) {
    const size_t tile = tile_size(m);
    for (size_t last = tile; last < m.files.size(); last += tile) {
        if (std::min(m.files[last].end, m.num_params) == m.num_params) continue;  // past it: padding only (above)
        const size_t t = (last - 1) / tile;
        const std::string which = m.sync.every == 0 ? "optimizer files"
                                  : last > (size_t)m.world_size ? "outer files"
                                                                : "files of replica " + std::to_string(t);
        fail("%s: the %s cover %llu of %llu parameters", path.c_str(), which.c_str(),
             (unsigned long long)m.files[last].end, (unsigned long long)m.num_params);
    }
}

// Version 3's and 4's "sync" (--sync-every; 4 adds shard_group, ranks per replica, a divisor of world_size);
// version 2 has none.
SyncMeta sync_from_json(const nlohmann::json& j, int version, int step, int world_size, const std::string& path) {
    SyncMeta s;
    if (version == CHECKPOINT_META_VERSION) return s;
    const nlohmann::json& js = field(j, "sync", "sync", path);
    if (version == CHECKPOINT_META_VERSION_SYNC_SHARDED) {
        s.shard_group = (int)int_field(js, "shard_group", "sync.shard_group", 2, world_size, path);
        if (world_size % s.shard_group != 0)
            fail("%s: field \"sync.shard_group\" is %d, which does not divide world_size %d", path.c_str(),
                 s.shard_group, world_size);
    }
    s.every = (int)int_field(js, "every", "sync.every", 1, I32_MAX, path);
    s.last_sync_step = (int)int_field(js, "last_sync_step", "sync.last_sync_step", 0, step, path);
    for (const char* key : {"outer_lr", "outer_momentum"}) {
        const nlohmann::json& v = field(js, key, std::string("sync.") + key, path);
        if (!v.is_number() || !(v.get<double>() >= 0.0 && v.get<double>() <= 16.0))
            fail("%s: field \"sync.%s\" is %s, expected a number in [0, 16]", path.c_str(), key, shown(v).c_str());
        (std::string(key) == "outer_lr" ? s.outer_lr : s.outer_momentum) = v.get<float>();
    }
    return s;
}

CheckpointMeta meta_from_json_unchecked(const nlohmann::json& j, const std::string& path) {
    CheckpointMeta m;
    if (!j.is_object()) fail("%s: not a JSON object", path.c_str());
    const std::string format = string_field(j, "format", "format", path);
    if (format != "llmc checkpoint")
        fail("%s: not a checkpoint metadata file (format \"%s\")", path.c_str(), format.c_str());
    const int version = (int)int_field(j, "version", "version", 0, I32_MAX, path);
    if (version < CHECKPOINT_META_VERSION || version > CHECKPOINT_META_VERSION_SYNC_SHARDED)
        fail("%s: metadata version %d, this program reads versions %d to %d%s", path.c_str(), version,
             CHECKPOINT_META_VERSION, CHECKPOINT_META_VERSION_SYNC_SHARDED,
             version == 1 ? " (version 1 has no checksum of its own)" : "");
    m.step = (int)int_field(j, "step", "step", 1, I32_MAX, path);
    m.config = model_from_json(j, path);
    m.num_params = (uint64_t)int_field(j, "num_params", "num_params", 1, LIMIT, path);
    if (m.num_params != ParamLayout(m.config).total)
        fail("%s: field \"num_params\" is %llu, but the model %s has %zu parameters", path.c_str(),
             (unsigned long long)m.num_params, m.config.describe().c_str(), ParamLayout(m.config).total);
    m.world_size = (int)int_field(j, "world_size", "world_size", 1, 1 << 20, path);
    m.zero_stage = (int)int_field(j, "zero_stage", "zero_stage", 0, 2, path);
    must_match_from_json(j, path, &m);
    m.max_steps = (int)int_field(j, "max_steps", "max_steps", 1, I32_MAX, path);
    m.data = position_from_json(j, path);
    m.guard = field(j, "guard", "guard", path);
    if (!m.guard.is_object()) fail("%s: field \"guard\" is %s, expected an object", path.c_str(), shown(m.guard).c_str());
    m.metrics_bytes = (int64_t)int_field(j, "metrics_bytes", "metrics_bytes", -1, LIMIT, path);
    m.sync = sync_from_json(j, version, m.step, m.world_size, path);
    const nlohmann::json& files = field(j, "files", "files", path);
    const size_t nfiles = 1 + (size_t)m.world_size + (m.sync.every > 0 ? (size_t)m.sync.shard_group : 0);
    if (!files.is_array() || files.size() != nfiles)
        fail("%s: field \"files\" must list model.bin and one %s file per writing rank (%d)%s", path.c_str(),
             m.sync.every > 0 ? "replica" : "optimizer", m.world_size,
             m.sync.every == 0 ? "" : m.sync.shard_group == 1 ? ", then outer.bin" : ", then the outer files");
    for (size_t i = 0; i < files.size(); i++) m.files.push_back(file_from_json(files[i], i, m, path));
    check_tiles_cover(m, path);
    return m;
}

}  // namespace

CheckpointMeta meta_from_json(const nlohmann::json& j, const std::string& path) {
    try {
        return meta_from_json_unchecked(j, path);
    } catch (const nlohmann::json::exception& e) {
        fail("%s: malformed checkpoint metadata (%s)", path.c_str(), e.what());
    }
}

CheckpointMeta read_checkpoint_meta(const std::string& dir) {
    const std::string path = dir + "/" + CHECKPOINT_META_NAME;
    const size_t size = file_size_or_fail(path);
    if (size > ((size_t)1 << 26)) fail("%s: %zu bytes, too large for checkpoint metadata", path.c_str(), size);
    std::string text(size, '\0');
    FILE* f = open_or_fail(path, "rb");
    try {
        read_exact(f, &text[0], size, path);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) fail("%s: not valid JSON (truncated or corrupted)", path.c_str());
    const uint32_t recorded = hex_field(j, CRC_KEY, CRC_KEY, path);
    const size_t at = crc_value_offset(text, hex32(recorded));
    if (at == std::string::npos) fail("%s: field \"%s\" not found in the file's text", path.c_str(), CRC_KEY);
    text.replace(at, 8, CRC_PLACEHOLDER);
    const uint32_t computed = crc32c(0, text.data(), text.size());
    if (computed != recorded)
        fail("%s: checksum mismatch: crc32c %s computed, %s recorded in its field \"%s\" (the file was edited or "
             "is corrupted)", path.c_str(), hex32(computed).c_str(), hex32(recorded).c_str(), CRC_KEY);
    return meta_from_json(j, path);
}

void write_checkpoint_meta(const std::string& dir, const CheckpointMeta& m) {
    std::string text = meta_to_json(m).dump(2) + "\n";
    const size_t at = crc_value_offset(text, CRC_PLACEHOLDER);
    if (at == std::string::npos) fail("write_checkpoint_meta: no checksum field in the text");
    text.replace(at, 8, hex32(crc32c(0, text.data(), text.size())));
    const std::string path = dir + "/" + CHECKPOINT_META_NAME;
    write_atomically(path, [&](FILE* f) { write_exact(f, text.data(), text.size(), path); });
}

std::string verify_checkpoint_file(const std::string& dir, const CheckpointMeta& meta, size_t index) {
    const CheckpointFileInfo& f = meta.files.at(index);
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
    // The header must say what meta.json says (a file with a valid checksum may still be the wrong one).
    try {
        if (index == 0) {
            const ModelConfig c = read_model_config(path);
            if (!(c == meta.config))
                return path + ": model " + c.describe() + ", meta.json says " + meta.config.describe();
        } else {
            FILE* fp = open_or_fail(path, "rb");
            int32_t h[256];
            try {
                read_exact(fp, h, sizeof h, path);
            } catch (...) {
                std::fclose(fp);
                throw;
            }
            std::fclose(fp);
            check_optim_header(path, h, meta, f);
        }
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

namespace {

// "4 ranks as 2 replicas of 2 ranks"
std::string describe_replicas(const CheckpointMeta& m) {
    const int n = m.sync.shard_group;
    return std::to_string(m.world_size) + " rank(s) as " + std::to_string(m.sync.replicas(m.world_size)) +
           " replica(s) of " + std::to_string(n) + (n == 1 ? " rank" : " ranks");
}

}  // namespace

void check_resume_compatible(const CheckpointMeta& s, const CheckpointMeta& n, const std::string& dir) {
    if (!(s.config == n.config))
        throw ResumeMismatch(dir + ": written for model " + s.config.describe() + ", this run has " +
                             n.config.describe() + " (-e)");
    auto same = [&](const char* flag, long long a, long long b) {
        if (a != b)
            throw ResumeMismatch(dir + ": written with " + flag + " " + std::to_string(a) + ", this run has " + flag +
                                 " " + std::to_string(b) + "; resume with the same value");
    };
    // -b may change (say with the number of ranks): a step is -d tokens, the same sequences whatever their split
    // into micro-steps of -b, and checkpoints lie between steps. Only -a 1 trains on "the first batch" of -b.
    if (s.overfit || n.overfit) same("-b", s.batch_size, n.batch_size);
    same("-t", s.seq_len, n.seq_len);
    same("-d", s.total_batch, n.total_batch);
    same("--seed", (long long)s.seed, (long long)n.seed);
    same("--shuffle", s.shuffle, n.shuffle);
    same("-a", s.overfit, n.overfit);
    same("--sync-every", s.sync.every, n.sync.every);
    if (s.sync.outer_lr != n.sync.outer_lr || s.sync.outer_momentum != n.sync.outer_momentum)
        throw ResumeMismatch(dir + ": written with --outer-lr " + std::to_string(s.sync.outer_lr) +
                             " --outer-momentum " + std::to_string(s.sync.outer_momentum) + ", this run has " +
                             std::to_string(n.sync.outer_lr) + " and " + std::to_string(n.sync.outer_momentum) +
                             "; resume with the same values");
    // Each replica has its own AdamW state and, mid-period, its own parameters: they resume only on the same number
    // of replicas. A replica's state is stored by logical ranges, so its ranks per replica may change.
    if (s.sync.every > 0 && s.sync.replicas(s.world_size) != n.sync.replicas(n.world_size))
        throw ResumeMismatch(dir + ": written by " + describe_replicas(s) + " with --sync-every " +
                             std::to_string(s.sync.every) + ", this run has " + describe_replicas(n) +
                             "; a --sync-every checkpoint resumes on the same number of replicas (ranks / "
                             "--shard-group), with any number of ranks per replica");
    if (!(s.train_data == n.train_data))
        throw ResumeMismatch(dir + ": written for training data of " + describe(s.train_data) + ", this run's -i has " +
                             describe(n.train_data) + "; resume with the same files");
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

std::string optim_file_name(size_t i) {
    char name[32];
    std::snprintf(name, sizeof name, "optim_%05zu.bin", i);
    return name;
}

std::string replica_file_name(int replica, int shard, int shard_group) {
    char name[48];
    if (shard_group == 1) std::snprintf(name, sizeof name, "replica_%05d.bin", replica);
    else std::snprintf(name, sizeof name, "replica_%05d_shard_%05d.bin", replica, shard);
    return name;
}

std::string outer_file_name(int shard, int shard_group) {
    if (shard_group == 1) return OUTER_FILE_NAME;
    char name[40];
    std::snprintf(name, sizeof name, "outer_shard_%05d.bin", shard);
    return name;
}

int state_file_arrays(const std::string& name) {
    if (name.rfind("outer", 0) == 0) return 2;
    return name.rfind("replica_", 0) == 0 ? 4 : 3;
}

size_t sync_replica_file_index(const CheckpointMeta& m, int replica, int shard) {
    return 1 + (size_t)replica * (size_t)m.sync.shard_group + (size_t)shard;
}
size_t sync_outer_file_index(const CheckpointMeta& m, int shard) { return 1 + (size_t)m.world_size + (size_t)shard; }

namespace {

// Optimizer files: magic OPTIM_STATE_MAGIC, [3] = 0. Replica and outer files: SYNC_STATE_MAGIC, [3] = their arrays.
int state_file_magic(const std::string& name) {
    return state_file_arrays(name) == 3 ? OPTIM_STATE_MAGIC : SYNC_STATE_MAGIC;
}
int state_file_h3(const std::string& name) { return state_file_arrays(name) == 3 ? 0 : state_file_arrays(name); }

}  // namespace

void check_optim_header(const std::string& path, const int32_t* h, const CheckpointMeta& meta,
                        const CheckpointFileInfo& fi) {
    const int magic = state_file_magic(fi.name);
    if (h[0] != magic)
        fail("%s: bad magic %d (expected %d: %s)", path.c_str(), h[0], magic,
             magic == OPTIM_STATE_MAGIC ? "an optimizer-state file" : "a --sync-every state file");
    if (h[1] != OPTIM_STATE_VERSION) fail("%s: version %d, expected %d", path.c_str(), h[1], OPTIM_STATE_VERSION);
    if (h[3] != state_file_h3(fi.name))
        fail("%s: header word 3 is %d, expected %d (the arrays of %s)", path.c_str(), h[3], state_file_h3(fi.name),
             fi.name.c_str());
    if (h[2] != meta.step || get_u64(h + 4) != meta.num_params || get_u64(h + 6) != fi.begin ||
        get_u64(h + 8) != fi.end)
        fail("%s: header says step %d, %llu parameters, range [%llu, %llu); meta.json says step %d, %llu, "
             "[%llu, %llu)",
             path.c_str(), h[2], (unsigned long long)get_u64(h + 4), (unsigned long long)get_u64(h + 6),
             (unsigned long long)get_u64(h + 8), meta.step, (unsigned long long)meta.num_params,
             (unsigned long long)fi.begin, (unsigned long long)fi.end);
}

CheckpointFileInfo write_optim_state(const std::string& dir, const std::string& name, int step, uint64_t num_params,
                                     uint64_t begin, uint64_t end,
                                     const std::function<void(int, uint64_t, size_t, float*)>& fetch,
                                     const std::function<void(int)>& before_rename) {
    CheckpointFileInfo info;
    info.name = name, info.begin = begin, info.end = end;
    const std::string path = dir + "/" + name;
    write_atomically(path, [&](FILE* f) {
        int32_t h[HEADER_INTS] = {};
        h[0] = state_file_magic(name), h[1] = OPTIM_STATE_VERSION, h[2] = step, h[3] = state_file_h3(name);
        put_u64(h + 4, num_params), put_u64(h + 6, begin), put_u64(h + 8, end);
        uint32_t crc = crc32c(0, h, HEADER_BYTES);
        write_exact(f, h, HEADER_BYTES, path);
        const size_t chunk = (size_t)1 << 22;
        std::vector<float> buf(std::min<uint64_t>(chunk, end - begin));
        const int arrays = state_file_arrays(name);
        for (int which = 0; which < arrays; which++)
            for (uint64_t off = 0; off < end - begin; off += chunk) {
                const size_t n = (size_t)std::min<uint64_t>(chunk, end - begin - off);
                fetch(which, off, n, buf.data());
                crc = crc32c(crc, buf.data(), n * sizeof(float));
                write_exact(f, buf.data(), n * sizeof(float), path);
            }
        info.crc32c = crc;
        info.bytes = HEADER_BYTES + (uint64_t)arrays * (end - begin) * sizeof(float);
        std::fflush(f);
        if (before_rename) before_rename(step);
    });
    return info;
}

void read_optim_state(const std::string& dir, const CheckpointMeta& meta, int which, uint64_t lo, uint64_t hi,
                      float* dst) {
    if (meta.sync.every > 0) fail("%s: a --sync-every checkpoint has no optimizer files (replica files)", dir.c_str());
    for (size_t i = 1; i < meta.files.size(); i++) read_state_file(dir, meta, i, which, lo, hi, dst);
}

void read_state_file(const std::string& dir, const CheckpointMeta& meta, size_t index, int which, uint64_t lo,
                     uint64_t hi, float* dst) {
    const CheckpointFileInfo& fi = meta.files.at(index);
    const uint64_t a = std::max(lo, fi.begin), b = std::min(hi, fi.end);
    if (a >= b) return;
    if (which < 0 || which >= state_file_arrays(fi.name))
        fail("%s/%s: no array %d (it holds %d)", dir.c_str(), fi.name.c_str(), which, state_file_arrays(fi.name));
    const std::string path = dir + "/" + fi.name;
    FILE* f = open_or_fail(path, "rb");
    int32_t h[HEADER_INTS];
    try {
        read_exact(f, h, HEADER_BYTES, path);
        check_optim_header(path, h, meta, fi);
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

}  // namespace llmc
