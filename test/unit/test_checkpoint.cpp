// Unit tests of the checkpoint pieces (llmc/checkpoint.h, llmc/outlier.h): CRC-32C, metadata round trip and
// validation, optimizer-state files written by N ranks read back as any range, corruption detection, retention,
// and the step guard (z-score windows, non-finite counting, state round trip). End-to-end checks (kill, resume,
// resharding) are in test/e2e/checkpoint_test.sh.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmc/checkpoint.h"
#include "llmc/outlier.h"
#include "llmc/rng.h"
#include "test/fixtures/testing.h"

using namespace llmc;

static uint32_t crc32c_bitwise(const unsigned char* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

// This program's directory, emptied at the first call.
static const std::string& tmp_root() {
    static const std::string dir = testing::tmp_dir("test_checkpoint");
    return dir;
}

static void test_crc() {
    testing::check("crc32c('123456789') = e3069283", crc32c(0, "123456789", 9) == 0xE3069283u, "got %08x",
                   crc32c(0, "123456789", 9));
    // Every length 0..300 and unaligned starts, against the bit-by-bit definition; continuation in two parts.
    Rng rng(1);
    std::vector<unsigned char> buf(400);
    for (auto& b : buf) b = (unsigned char)rng.next_u64();
    bool ok = true;
    for (size_t start = 0; start < 8; start++)
        for (size_t n = 0; n <= 300; n++) {
            uint32_t want = crc32c_bitwise(buf.data() + start, n);
            ok = ok && crc32c(0, buf.data() + start, n) == want;
            size_t cut = n / 3;
            ok = ok && crc32c(crc32c(0, buf.data() + start, cut), buf.data() + start + cut, n - cut) == want;
        }
    testing::check("crc32c matches the bitwise definition (all lengths, offsets, split in two)", ok);
}

static CheckpointMeta sample_meta() {
    CheckpointMeta m;
    m.step = 42;
    m.config.max_seq_len = 32, m.config.vocab_size = 64, m.config.padded_vocab_size = 128;
    m.config.num_layers = 2, m.config.num_heads = 2, m.config.channels = 32;
    m.num_params = ParamLayout(m.config).total, m.world_size = 3, m.zero_stage = 1;
    m.batch_size = 4, m.seq_len = 32, m.total_batch = 384, m.seed = 1337, m.shuffle = true, m.overfit = false;
    m.max_steps = 100;
    m.train_data.shards = 3, m.train_data.tokens = 60000, m.train_data.digest = 0x1234abcd;
    m.data.epoch = 1, m.data.shard = 2, m.data.sequence = 36, m.data.micro_step = 0;
    StepGuard g(2.0f, 3.0f, 5, 4);
    for (int i = 0; i < 6; i++) g.judge(i + 1, 1.0f + 0.1f * (float)i, 0.5f + 0.01f * (float)(i * i));
    m.guard = g.state();
    m.metrics_bytes = 12345;
    CheckpointFileInfo model;
    model.name = "model.bin", model.bytes = 1024 + 4 * m.num_params, model.crc32c = 0xDEADBEEF;
    m.files = {model};
    const uint64_t cuts[4] = {0, 384, 768, m.num_params};
    for (int r = 0; r < 3; r++) {
        CheckpointFileInfo f;
        f.name = "optim_0000" + std::to_string(r) + ".bin", f.begin = cuts[r], f.end = cuts[r + 1];
        f.bytes = 1024 + 12 * (f.end - f.begin), f.crc32c = (uint32_t)(r * 77);
        m.files.push_back(f);
    }
    return m;
}

static void test_meta() {
    CheckpointMeta m = sample_meta();
    CheckpointMeta back = meta_from_json(nlohmann::json::parse(meta_to_json(m).dump()), "x");
    bool same = back.step == m.step && back.config == m.config && back.num_params == m.num_params &&
                back.world_size == 3 && back.zero_stage == 1 && back.total_batch == 384 && back.seed == 1337 &&
                back.data.epoch == 1 && back.data.shard == 2 && back.data.sequence == 36 &&
                back.metrics_bytes == 12345 && back.guard == m.guard && back.files.size() == 4 &&
                back.files[0].crc32c == 0xDEADBEEF && back.files[2].begin == 384 && back.files[2].end == 768 &&
                back.files[3].bytes == m.files[3].bytes;
    testing::check("metadata survives a JSON round trip", same);

    auto rejects = [&](const char* name, auto mutate, const char* want) {
        nlohmann::json j = meta_to_json(m);
        mutate(j);
        try {
            meta_from_json(j, "dir/meta.json");
            testing::check(name, false, "accepted");
        } catch (const Error& e) {
            testing::check(name, std::string(e.what()).find(want) != std::string::npos, "message: %s", e.what());
        }
    };
    rejects("metadata: missing field", [](nlohmann::json& j) { j.erase("data"); },
            "dir/meta.json: field \"data\" is missing");
    rejects("metadata: gap between optimizer ranges", [](nlohmann::json& j) { j["files"][2]["begin"] = 390; },
            "expected a range starting at 384");
    rejects("metadata: num_params is not the model's", [](nlohmann::json& j) { j["num_params"] = 1200; },
            "field \"num_params\" is 1200, but the model");
    rejects("metadata: path in a file name", [](nlohmann::json& j) { j["files"][1]["name"] = "../x"; },
            "field \"files[1].name\" is \"../x\", expected \"optim_00000.bin\"");
    // Integers are never wrapped: -4 is not 2^64 - 4 (it read before the order vector, ASan found it).
    rejects("metadata: a negative data.sequence", [](nlohmann::json& j) { j["data"]["sequence"] = -4; },
            "field \"data.sequence\" is -4, expected 0 ..");
    rejects("metadata: a negative metrics_bytes below -1", [](nlohmann::json& j) { j["metrics_bytes"] = -5; },
            "field \"metrics_bytes\" is -5");
    rejects("metadata: a string where a number belongs names the field, not a json exception",
            [](nlohmann::json& j) { j["step"] = "42"; }, "dir/meta.json: field \"step\" is \"42\", expected an integer");
    rejects("metadata: a fraction where an integer belongs", [](nlohmann::json& j) { j["data"]["epoch"] = 1.5; },
            "field \"data.epoch\" is 1.5, expected an integer");
    rejects("metadata: a step past int", [](nlohmann::json& j) { j["step"] = 1ll << 40; }, "field \"step\" is 1099511627776");
    rejects("metadata: mid-step position", [](nlohmann::json& j) { j["data"]["micro_step"] = 1; },
            "field \"data.micro_step\" is 1, expected 0 .. 0");
    rejects("metadata: files do not match world_size", [](nlohmann::json& j) { j["world_size"] = 2; },
            "one optimizer file per writing rank (2)");
    rejects("metadata: a file size that is not the range's", [](nlohmann::json& j) { j["files"][1]["bytes"] = 7; },
            "field \"files[1].bytes\" is 7, expected 5632");
    rejects("metadata: bool as a number", [](nlohmann::json& j) { j["must_match"]["shuffle"] = 1; },
            "field \"must_match.shuffle\" is 1, expected true or false");
    rejects("metadata: bad digest", [](nlohmann::json& j) { j["train_data"]["digest"] = "xyz"; },
            "field \"train_data.digest\" is \"xyz\"");
    rejects("metadata: version 1 (no checksum)", [](nlohmann::json& j) { j["version"] = 1; },
            "metadata version 1, this program reads versions 2 to 4");

    // meta.json's own checksum: written, read back, and any changed byte is caught.
    const std::string dir = tmp_root() + "/meta";
    make_checkpoint_directory(dir);
    write_checkpoint_meta(dir, m);
    testing::check("meta.json with its checksum reads back", read_checkpoint_meta(dir).data.sequence == 36);
    std::string text;
    {
        FILE* f = std::fopen((dir + "/meta.json").c_str(), "rb");
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
        std::fclose(f);
    }
    auto rewrite = [&](const std::string& t) {
        FILE* f = std::fopen((dir + "/meta.json").c_str(), "wb");
        std::fwrite(t.data(), 1, t.size(), f);
        std::fclose(f);
    };
    const size_t at = text.find("\"sequence\": 36");
    std::string edited = text;
    edited.replace(at, 14, "\"sequence\": 32");
    rewrite(edited);
    try {
        read_checkpoint_meta(dir);
        testing::check("an edited meta.json fails its checksum", false, "accepted");
    } catch (const Error& e) {
        testing::check("an edited meta.json fails its checksum",
                       std::string(e.what()).find("meta.json: checksum mismatch: crc32c") != std::string::npos, "%s",
                       e.what());
    }

    CheckpointMeta other = m;
    other.seq_len = 64;
    try {
        check_resume_compatible(m, other, "ckpt");
        testing::check("-t mismatch refused", false, "accepted");
    } catch (const Error& e) {
        testing::check("-t mismatch refused", std::string(e.what()).find("-t 32, this run has -t 64") != std::string::npos,
                       "%s", e.what());
    }
}

// Three "ranks" write their ranges; reading any range back gives the original arrays, whatever the cut.
static void test_optim_files(const std::string& tmp) {
    const std::string dir = tmp + "/ckpt_00000042";
    make_checkpoint_directory(dir);
    CheckpointMeta m = sample_meta();
    std::vector<float> arr[3];
    for (int w = 0; w < 3; w++)
        for (size_t i = 0; i < m.num_params; i++) arr[w].push_back((float)(w * 10000 + i) * 0.5f);
    for (size_t k = 1; k < m.files.size(); k++) {
        CheckpointFileInfo& f = m.files[k];
        CheckpointFileInfo got = write_optim_state(dir, f.name, m.step, m.num_params, f.begin, f.end,
                                                   [&](int which, uint64_t off, size_t n, float* dst) {
                                                       for (size_t i = 0; i < n; i++)
                                                           dst[i] = arr[which][f.begin + off + i];
                                                   });
        uint64_t bytes = 0;
        uint32_t crc = crc32c_file(dir + "/" + f.name, &bytes);
        testing::check("optimizer file " + f.name + ": size and CRC as returned", got.bytes == bytes && got.crc32c == crc);
        f.bytes = got.bytes, f.crc32c = got.crc32c;
    }
    bool ok = true;
    const uint64_t N = m.num_params;
    const uint64_t ranges[][2] = {{0, N}, {0, 1}, {383, 385}, {500, 501}, {700, N}, {N - 1, N}, {10, N - 10}};
    for (auto& r : ranges)
        for (int w = 0; w < 3; w++) {
            std::vector<float> out(r[1] - r[0], -1.0f);
            read_optim_state(dir, m, w, r[0], r[1], out.data());
            for (uint64_t i = r[0]; i < r[1]; i++) ok = ok && out[i - r[0]] == arr[w][i];
        }
    testing::check("optimizer state written by 3 ranks reads back as any range", ok);

    // Verification: intact, then a flipped byte, then a truncation.
    testing::check("an intact file verifies", verify_checkpoint_file(dir, m, 2).empty());
    const std::string p = dir + "/" + m.files[2].name;
    FILE* f = std::fopen(p.c_str(), "r+b");
    std::fseek(f, 2000, SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, 2000, SEEK_SET);
    std::fputc(c ^ 1, f);
    std::fclose(f);
    std::string msg = verify_checkpoint_file(dir, m, 2);
    testing::check("a flipped bit is caught, naming the file and the checksums",
                   msg.find(p + ": checksum mismatch: crc32c ") != std::string::npos, "%s", msg.c_str());
    if (truncate(p.c_str(), 1500) != 0) testing::fail("truncate", "failed");
    msg = verify_checkpoint_file(dir, m, 2);
    testing::check("a truncated file is caught", msg.find("1500 bytes, meta.json records") != std::string::npos, "%s",
                   msg.c_str());
}

static void test_retention(const std::string& tmp) {
    const std::string out = tmp + "/ret";
    auto make = [&](int step, bool complete) {
        std::string d = checkpoint_dir(out, step);
        make_checkpoint_directory(d);
        if (complete) write_checkpoint_meta(d, sample_meta());
        FILE* f = std::fopen((d + "/model.bin").c_str(), "wb");
        std::fclose(f);
    };
    for (int s = 2; s <= 20; s += 2) make(s, s != 14);
    make(24, true);  // a later one from a run that crashed after it (kept: rewritten when reached)
    apply_retention(out, 2, 8, 20);
    std::vector<int> left = list_checkpoint_steps(out);
    std::string got;
    for (int s : left) got += std::to_string(s) + " ";
    testing::check("retention -nk 2 -nm 8 at step 20 keeps 8 16 18 20 24", got == "8 16 18 20 24 ", "kept %s",
                   got.c_str());
    testing::check("list_checkpoint_steps ignores other names", [&] {
        make_checkpoint_directory(out + "/ckpt_x1");
        make_checkpoint_directory(out + "/notckpt_00000003");
        return list_checkpoint_steps(out).size() == 5;
    }());
}

static void test_guard() {
    // Window 4: no decision until 4 values; then z against the window; non-finite values never enter it.
    StepGuard g(2.0f, 0.0f, 3, 4);
    StepVerdict v;
    const float losses[4] = {1.0f, 1.1f, 0.9f, 1.0f};
    bool none = true;
    for (int i = 0; i < 4; i++) none = none && !g.judge(i + 1, losses[i], 1.0f).skip;
    testing::check("no outlier decision before the window is full", none);
    v = g.judge(5, 5.0f, 1.0f);
    testing::check("a loss spike (z ~ 56) is skipped as a loss outlier", v.skip && v.reason == "loss outlier",
                   "z %g", v.loss_z);
    // The window now holds 1.1 0.9 1.0 5.0 (the spike entered it): the same spike scores lower.
    v = g.judge(6, 1.0f, 1.0f);
    testing::check("a normal loss after the spike is applied", !v.skip, "z %g", v.loss_z);
    v = g.judge(7, NAN, 1.0f);
    testing::check("NaN loss: skipped as non-finite", v.skip && v.reason == "non-finite" && g.bad_in_a_row() == 1);
    g.judge(8, 1.0f, INFINITY);
    testing::check("inf norm: counted", g.bad_in_a_row() == 2);
    nlohmann::json saved = nlohmann::json::parse(g.state().dump());
    try {
        g.judge(9, NAN, NAN);
        testing::check("the third non-finite step in a row stops the run", false, "no error");
    } catch (const Error& e) {
        testing::check("the third non-finite step in a row stops the run",
                       std::string(e.what()).find("3 steps in a row") != std::string::npos, "%s", e.what());
    }
    // A guard restored from the saved state decides exactly as the original would have.
    StepGuard a(2.0f, 0.0f, 3, 4), b(2.0f, 0.0f, 3, 4);
    a.set_state(saved), b.set_state(saved);
    testing::check("restored state: bad-step count", a.bad_in_a_row() == 2);
    v = a.judge(9, 1.0f, 1.0f);
    testing::check("a finite step resets the bad-step count", !v.skip && a.bad_in_a_row() == 0);
    bool same = true;
    b.judge(9, 1.0f, 1.0f);
    Rng rng(3);
    for (int i = 0; i < 50; i++) {
        float x = 1.0f + (float)rng.uniform() * (i % 7 == 0 ? 3.0f : 0.2f);
        StepVerdict va = a.judge(10 + i, x, x), vb = b.judge(10 + i, x, x);
        same = same && va.skip == vb.skip && (va.loss_z == vb.loss_z || (std::isnan(va.loss_z) && std::isnan(vb.loss_z)));
    }
    testing::check("two guards restored from one state decide identically", same && a.state() == b.state());
    try {
        StepGuard w(2.0f, 0.0f, 3, 8);
        w.set_state(saved);
        testing::check("a state of another window size is refused", false, "accepted");
    } catch (const Error&) {
        testing::pass("a state of another window size is refused");
    }
}

// --sync-every's checkpoints (meta.json version 3): "sync", one replica file per rank over all the parameters, then
// outer.bin; their headers and arrays; the resume checks that need the same period, outer optimizer and world size.
static CheckpointMeta sample_sync_meta() {
    CheckpointMeta m = sample_meta();
    m.world_size = 2, m.sync.every = 8, m.sync.outer_lr = 0.7f, m.sync.outer_momentum = 0.9f;
    m.sync.last_sync_step = 40;
    m.files.resize(1);
    for (const std::string& name : {replica_file_name(0), replica_file_name(1), std::string(OUTER_FILE_NAME)}) {
        CheckpointFileInfo f;
        f.name = name, f.begin = 0, f.end = m.num_params;
        f.bytes = 1024 + 4 * (uint64_t)state_file_arrays(name) * m.num_params;
        m.files.push_back(f);
    }
    return m;
}

static void test_sync_meta(const std::string& tmp) {
    CheckpointMeta m = sample_sync_meta();
    const nlohmann::json j = meta_to_json(m);
    CheckpointMeta back = meta_from_json(nlohmann::json::parse(j.dump()), "x");
    testing::check("--sync-every metadata: version 3, and it survives a JSON round trip",
                   j["version"] == 3 && back.sync.every == 8 && back.sync.outer_lr == 0.7f &&
                       back.sync.outer_momentum == 0.9f && back.sync.last_sync_step == 40 && back.files.size() == 4 &&
                       back.files[3].name == "outer.bin" && back.files[1].end == m.num_params);
    testing::check("without --sync-every the metadata stays version 2, with no sync field",
                   meta_to_json(sample_meta())["version"] == 2 && !meta_to_json(sample_meta()).contains("sync"));
    auto rejects = [&](const char* name, auto mutate, const char* want) {
        nlohmann::json bad = j;
        mutate(bad);
        try {
            meta_from_json(bad, "dir/meta.json");
            testing::check(name, false, "accepted");
        } catch (const Error& e) {
            testing::check(name, std::string(e.what()).find(want) != std::string::npos, "message: %s", e.what());
        }
    };
    rejects("--sync-every metadata: version 3 without sync", [](nlohmann::json& x) { x.erase("sync"); },
            "field \"sync\" is missing");
    rejects("--sync-every metadata: a period of 0", [](nlohmann::json& x) { x["sync"]["every"] = 0; },
            "field \"sync.every\" is 0, expected 1 ..");
    rejects("--sync-every metadata: the last outer step after the checkpoint's step",
            [](nlohmann::json& x) { x["sync"]["last_sync_step"] = 43; }, "field \"sync.last_sync_step\" is 43");
    rejects("--sync-every metadata: a replica over part of the parameters",
            [](nlohmann::json& x) { x["files"][2]["end"] = 100, x["files"][2]["bytes"] = 1024 + 16 * 100; },
            "the files of replica 1 cover 100 of");
    rejects("--sync-every metadata: optimizer files instead of replica files",
            [](nlohmann::json& x) { x["files"][1]["name"] = "optim_00000.bin"; }, "expected \"replica_00000.bin\"");
    rejects("--sync-every metadata: outer.bin missing", [](nlohmann::json& x) { x["files"].erase(3); },
            "one replica file per writing rank (2), then outer.bin");
    rejects("--sync-every metadata: a non-number outer lr", [](nlohmann::json& x) { x["sync"]["outer_lr"] = "0.7"; },
            "field \"sync.outer_lr\" is \"0.7\"");

    // The files: 4 arrays per replica, 2 in outer.bin, each read back by index; a replica file's header says so.
    const std::string dir = tmp + "/ckpt_00000042";
    make_checkpoint_directory(dir);
    const uint64_t N = m.num_params;
    for (size_t k = 1; k < m.files.size(); k++) {
        CheckpointFileInfo& f = m.files[k];
        auto fetch = [&](int which, uint64_t off, size_t n, float* dst) {
            for (size_t i = 0; i < n; i++) dst[i] = (float)(k * 1000000 + which * 10000 + off + i);
        };
        CheckpointFileInfo got = write_optim_state(dir, f.name, m.step, N, 0, N, fetch);
        testing::check(f.name + ": size " + std::to_string(state_file_arrays(f.name)) + " x 4N + header",
                       got.bytes == f.bytes, "%llu bytes", (unsigned long long)got.bytes);
        f.bytes = got.bytes, f.crc32c = got.crc32c;
    }
    bool ok = true;
    for (size_t k = 1; k < m.files.size(); k++)
        for (int which = 0; which < state_file_arrays(m.files[k].name); which++) {
            std::vector<float> out(N);
            read_state_file(dir, m, k, which, 0, N, out.data());
            for (uint64_t i = 0; i < N; i++) ok = ok && out[i] == (float)(k * 1000000 + which * 10000 + i);
        }
    testing::check("--sync-every state files read back array by array", ok);
    testing::check("replica and outer files verify", verify_checkpoint_file(dir, m, 1).empty() &&
                                                         verify_checkpoint_file(dir, m, 3).empty());
    CheckpointMeta swapped = m;
    std::swap(swapped.files[1], swapped.files[3]);  // outer.bin where a replica file belongs: its header disagrees
    swapped.files[1].name = m.files[1].name;
    std::rename((dir + "/outer.bin").c_str(), (dir + "/tmp").c_str());
    std::rename((dir + "/" + m.files[1].name).c_str(), (dir + "/outer.bin").c_str());
    std::rename((dir + "/tmp").c_str(), (dir + "/" + m.files[1].name).c_str());
    swapped.files[1].bytes = m.files[3].bytes, swapped.files[1].crc32c = m.files[3].crc32c;
    const std::string msg = verify_checkpoint_file(dir, swapped, 1);
    testing::check("an outer file under a replica file's name is caught by its header",
                   msg.find("header word 3 is 2, expected 4") != std::string::npos, "%s", msg.c_str());

    auto refused = [&](const char* name, const CheckpointMeta& now, const char* want) {
        try {
            check_resume_compatible(m, now, "ckpt");
            testing::check(name, false, "accepted");
        } catch (const ResumeMismatch& e) {
            testing::check(name, std::string(e.what()).find(want) != std::string::npos, "%s", e.what());
        }
    };
    CheckpointMeta now = m;
    now.sync.every = 4;
    refused("resume with another --sync-every", now, "written with --sync-every 8, this run has --sync-every 4");
    now = m, now.sync.outer_momentum = 0.5f;
    refused("resume with another --outer-momentum", now, "--outer-momentum");
    now = m, now.world_size = 3;
    refused("resume of a --sync-every checkpoint on another world size", now,
            "written by 2 rank(s) as 2 replica(s) of 1 rank with --sync-every 8, this run has 3 rank(s) as 3 "
            "replica(s) of 1 rank");
    now = m, now.sync = SyncMeta();
    refused("resume of a --sync-every checkpoint without it", now, "this run has --sync-every 0");
}

// --sync-every with --shard-group (meta.json version 4): 4 ranks as 2 replicas of 2 ranks; each replica's files and
// the outer files tile [0, num_params) shard by shard; the names, sync.shard_group and the tiling are checked; a
// resume needs the same number of replicas, not the same ranks per replica.
static CheckpointMeta sample_sharded_sync_meta() {
    CheckpointMeta m = sample_meta();
    m.world_size = 4, m.sync.every = 4, m.sync.outer_lr = 0.7f, m.sync.outer_momentum = 0.9f, m.sync.shard_group = 2;
    m.files.resize(1 + 4 + 2);
    const uint64_t cuts[3] = {0, 512, m.num_params};
    for (int r = 0; r < 2; r++)
        for (int s = 0; s < 2; s++) {
            CheckpointFileInfo& f = m.files[sync_replica_file_index(m, r, s)];
            f.name = replica_file_name(r, s, 2), f.begin = cuts[s], f.end = cuts[s + 1];
            f.bytes = 1024 + 16 * (f.end - f.begin);
            CheckpointFileInfo& o = m.files[sync_outer_file_index(m, s)];
            o.name = outer_file_name(s, 2), o.begin = cuts[s], o.end = cuts[s + 1], o.bytes = 1024 + 8 * (o.end - o.begin);
        }
    return m;
}

static void test_sharded_sync_meta() {
    const CheckpointMeta m = sample_sharded_sync_meta();
    const nlohmann::json j = meta_to_json(m);
    std::vector<std::string> names;
    for (const auto& f : j["files"]) names.push_back(f["name"].get<std::string>());
    const std::vector<std::string> want = {"model.bin", "replica_00000_shard_00000.bin", "replica_00000_shard_00001.bin",
                                           "replica_00001_shard_00000.bin", "replica_00001_shard_00001.bin",
                                           "outer_shard_00000.bin", "outer_shard_00001.bin"};
    const CheckpointMeta back = meta_from_json(nlohmann::json::parse(j.dump()), "x");
    testing::check("replicas of 2 ranks: version 4 with sync.shard_group, files replica by replica, shard by shard, "
                   "then the outer files; it survives a JSON round trip",
                   j["version"] == 4 && j["sync"]["shard_group"] == 2 && names == want && back.sync.shard_group == 2 &&
                       back.files.size() == 7 && back.files[4].begin == 512 && back.files[6].end == m.num_params &&
                       state_file_arrays(back.files[5].name) == 2 && state_file_arrays(back.files[2].name) == 4);
    auto rejects = [&](const char* name, auto mutate, const char* expected) {
        nlohmann::json bad = j;
        mutate(bad);
        try {
            meta_from_json(bad, "dir/meta.json");
            testing::check(name, false, "accepted");
        } catch (const Error& e) {
            testing::check(name, std::string(e.what()).find(expected) != std::string::npos, "message: %s", e.what());
        }
    };
    rejects("version 4 without sync.shard_group", [](nlohmann::json& x) { x["sync"].erase("shard_group"); },
            "field \"sync.shard_group\" is missing");
    rejects("a group size that does not divide the world size", [](nlohmann::json& x) { x["sync"]["shard_group"] = 3; },
            "field \"sync.shard_group\" is 3, which does not divide world_size 4");
    rejects("a replica whose shards leave a gap", [](nlohmann::json& x) { x["files"][4]["begin"] = 640; },
            "replica_00001_shard_00001.bin covers [640,");
    rejects("a replica whose shards stop short", [](nlohmann::json& x) {
                x["files"][2]["end"] = 1000, x["files"][2]["bytes"] = 1024 + 16 * (1000 - 512);
            }, "the files of replica 0 cover 1000 of");
    rejects("the outer files in the wrong order", [](nlohmann::json& x) { std::swap(x["files"][5], x["files"][6]); },
            "expected \"outer_shard_00000.bin\"");

    auto resume = [&](int world, int group) {
        CheckpointMeta now = m;
        now.world_size = world, now.sync.shard_group = group;
        try {
            check_resume_compatible(m, now, "ckpt");
            return std::string();
        } catch (const ResumeMismatch& e) {
            return std::string(e.what());
        }
    };
    testing::check("2 replicas of 2 ranks resume as 2 replicas of 1 or 3 ranks",
                   resume(2, 1).empty() && resume(6, 3).empty() && resume(4, 2).empty(), "%s %s",
                   resume(2, 1).c_str(), resume(6, 3).c_str());
    const std::string msg = resume(4, 1);
    testing::check("2 replicas of 2 ranks do not resume as 4 replicas, and the message names both layouts",
                   msg.find("written by 4 rank(s) as 2 replica(s) of 2 ranks with --sync-every 4, this run has 4 "
                            "rank(s) as 4 replica(s) of 1 rank") != std::string::npos, "%s", msg.c_str());
}

int main() {
    try {
        const std::string tmp = tmp_root();
        test_crc();
        test_meta();
        test_optim_files(tmp);
        test_sync_meta(tmp);
        test_sharded_sync_meta();
        test_retention(tmp);
        test_guard();
    } catch (const std::exception& e) {
        testing::fail("unexpected exception", "%s", e.what());
    }
    return testing::finish();
}
