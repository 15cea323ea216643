// Data shards and the loader: header validation, batch contents, the contract that the global batch of every step
// is the same whatever the world size (each rank takes its slice of the same window), and the evaluation pass that
// reads every sequence once, partial windows included.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "llmc/batch_lookahead.h"
#include "llmc/dataloader.h"
#include "test/fixtures/testing.h"

using namespace llmc;

static void write_shard(const std::string& path, const std::vector<uint16_t>& tokens, int magic = SHARD_MAGIC,
                        int version = SHARD_VERSION, long header_count = -1) {
    int32_t header[256] = {0};
    header[0] = magic, header[1] = version;
    header[2] = (int32_t)(header_count < 0 ? (long)tokens.size() : header_count);
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(header, sizeof header, 1, f);
    if (!tokens.empty()) std::fwrite(tokens.data(), 2, tokens.size(), f);  // fwrite(nullptr, ...) is undefined
    std::fclose(f);
}

// All sequences (as their first input token) that `world` ranks see in `steps` steps, in global order.
static std::vector<int> global_order(const std::string& pattern, size_t B, size_t T, int world, size_t seqs_per_step,
                                     bool shuffle, int steps) {
    std::vector<DataLoader*> loaders;
    for (int r = 0; r < world; r++) loaders.push_back(new DataLoader(pattern, B, T, r, world, seqs_per_step, shuffle, 7));
    std::vector<int> seen, in(B * T), tg(B * T);
    size_t micro = loaders[0]->micro_steps_per_step();
    for (int s = 0; s < steps; s++)
        for (size_t m = 0; m < micro; m++)
            for (int r = 0; r < world; r++) {
                loaders[r]->next_batch(in.data(), tg.data());
                for (size_t b = 0; b < B; b++) seen.push_back(in[b * T]);
            }
    for (DataLoader* l : loaders) delete l;
    return seen;
}

// BatchLookahead (llmc/batch_lookahead.h) hands out the loader's micro-batches in the loader's order, whether or not
// each was read ahead, and its position() is the plain loader's after the same number of micro-batches, so a
// checkpoint taken with a batch read ahead resumes at the right batch; set_position and reset drop the read-ahead.
static void check_lookahead(const std::string& pattern, size_t B, size_t T, bool shuffle) {
    const std::string tag = std::string("lookahead") + (shuffle ? " (shuffled)" : "") + ": ";
    DataLoader plain(pattern, B, T, 0, 1, 6, shuffle, 3), ahead(pattern, B, T, 0, 1, 6, shuffle, 3);
    BatchLookahead look(ahead, B * T);
    std::vector<int> in(B * T), tg(B * T);
    bool same = true, positions = true;
    for (int k = 0; k < 40; k++) {  // beyond one epoch (6 steps x 3 micro-steps)
        plain.next_batch(in.data(), tg.data());
        const BatchLookahead::Batch& b = look.take();
        same &= b.inputs == in && b.targets == tg;
        if (k % 3 != 2) look.read_ahead();  // mostly read ahead, sometimes not
        positions &= look.position() == plain.position();
    }
    testing::check(tag + "the same micro-batches in the same order as the loader", same);
    testing::check(tag + "position() is the loader's after the micro-batches taken", positions);
    const LoaderPosition p = plain.position();
    plain.next_batch(in.data(), tg.data());
    look.read_ahead();
    DataLoader resumed(pattern, B, T, 0, 1, 6, shuffle, 3);
    BatchLookahead again(resumed, B * T);
    again.set_position(look.position());
    testing::check(tag + "resuming from position() (taken with a batch read ahead) reads the next batch",
                   look.position() == p && again.take().inputs == in && look.take().inputs == in);
    look.read_ahead();
    look.reset();
    plain.reset();
    plain.next_batch(in.data(), tg.data());
    testing::check(tag + "reset drops the batch read ahead", look.take().inputs == in);
}

int main() {
    const std::string dir = testing::tmp_dir("dataloader");
    // Two shards; token value = position + 1000*shard so every window is recognisable.
    const size_t T = 4;
    std::vector<uint16_t> s0(T * 24 + 1), s1(T * 12 + 1);
    for (size_t i = 0; i < s0.size(); i++) s0[i] = (uint16_t)i;
    for (size_t i = 0; i < s1.size(); i++) s1[i] = (uint16_t)(1000 + i);
    write_shard(dir + "/d_train_000.bin", s0);
    write_shard(dir + "/d_train_001.bin", s1);
    std::string pattern = dir + "/d_train_*.bin";
    check_lookahead(pattern, 2, T, false);
    check_lookahead(pattern, 2, T, true);

    ShardInfo info = read_shard_info(dir + "/d_train_000.bin");
    testing::check("shard header token count", info.num_tokens == s0.size());

    // Inputs are T tokens, targets the same window shifted by one.
    DataLoader one(pattern, 2, T, 0, 1, 6, false, 1);
    std::vector<int> in(2 * T), tg(2 * T);
    one.next_batch(in.data(), tg.data());
    bool ok = true;
    for (size_t i = 0; i < 2 * T; i++) ok &= in[i] == (int)i && tg[i] == (int)i + 1;
    testing::check("first batch is the first 2 sequences, targets shifted", ok);
    testing::check("micro-steps per step", one.micro_steps_per_step() == 3);
    testing::check("steps per epoch (24/6 + 12/6)", one.steps_per_epoch() == 6);

    // The same sequences in the same global order for world sizes 1, 2 and 3, with and without shuffling,
    // across shard boundaries and an epoch boundary (8 steps > 6 per epoch).
    for (bool shuffle : {false, true}) {
        std::vector<int> w1 = global_order(pattern, 1, T, 1, 6, shuffle, 8);
        std::vector<int> w2 = global_order(pattern, 1, T, 2, 6, shuffle, 8);
        std::vector<int> w3 = global_order(pattern, 2, T, 3, 6, shuffle, 8);
        std::string tag = shuffle ? " (shuffled)" : "";
        testing::check("world 2 sees world 1's global batches" + tag, w1 == w2);
        testing::check("world 3 (B=2) sees world 1's global batches" + tag, w1 == w3);
        bool second_shard = false;
        for (int x : w1) second_shard |= x >= 1000;
        testing::check("the loader reaches the second shard" + tag, second_shard);
    }
    std::vector<int> plain = global_order(pattern, 1, T, 1, 6, false, 4);
    std::vector<int> shuf = global_order(pattern, 1, T, 1, 6, true, 4);
    testing::check("shuffling changes the order", plain != shuf);

    // Resuming from a saved position continues with the same batches.
    DataLoader a(pattern, 2, T, 0, 1, 6, true, 3), b(pattern, 2, T, 0, 1, 6, true, 3);
    for (int i = 0; i < 10; i++) a.next_batch(in.data(), tg.data());
    b.set_position(a.position());
    std::vector<int> ia(2 * T), ib(2 * T);
    ok = true;
    for (int i = 0; i < 12; i++) {
        a.next_batch(ia.data(), tg.data());
        b.next_batch(ib.data(), tg.data());
        ok &= ia == ib;
    }
    testing::check("set_position resumes the same batches", ok);

    // position_after(k) is where k steps leave the loader (checkpoints are validated with it), across shards of
    // different sizes and three shuffled epochs; check_position refuses positions outside the data, also ones that
    // wrap around 2^64 (a position read from a file may hold anything).
    DataLoader c(pattern, 2, T, 0, 1, 6, true, 3);
    ok = true;
    for (uint64_t k = 0; k <= 3 * c.steps_per_epoch(); k++) {
        ok &= c.position() == c.position_after(k);
        for (size_t m = 0; m < c.micro_steps_per_step(); m++) c.next_batch(in.data(), tg.data());
    }
    testing::check("position_after(k) is where k steps leave the loader (3 shuffled epochs, 2 shard sizes)", ok);
    LoaderPosition bad = c.position_after(1);
    bad.sequence = UINT64_MAX - 3;
    testing::check("a sequence near 2^64 is refused (no wrap-around)",
                   c.check_position(bad).find("data.sequence 18446744073709551612 is out of range") == 0, "%s",
                   c.check_position(bad).c_str());
    bad = c.position_after(1), bad.shard = 2;
    testing::check("a shard index past the data is refused", c.check_position(bad).find("data.shard 2") == 0);
    {
    // The evaluation pass (-m -1): every sequence of every shard exactly once, in order, for world sizes 1..4 and
    // steps that do not divide a shard (8 and 9 sequences: shard 0's 24 -> 8,8,8 or 9,9,6; shard 1's 12 -> 8,4 or
    // 9,3), so windows are partial and some ranks read fewer than B sequences or none.
    std::vector<int> every;
    for (size_t j = 0; j < 24; j++) every.push_back((int)(j * T));
    for (size_t j = 0; j < 12; j++) every.push_back((int)(1000 + j * T));
    struct Shape { size_t B; int world; size_t per_step; };
    for (Shape sh : {Shape{2, 1, 8}, Shape{2, 2, 8}, Shape{2, 4, 8}, Shape{1, 4, 8}, Shape{3, 3, 9}, Shape{1, 1, 9}}) {
        std::vector<DataLoader*> ranks;
        for (int r = 0; r < sh.world; r++) ranks.push_back(new DataLoader(pattern, sh.B, T, r, sh.world, sh.per_step, true, 5));
        std::vector<int> seen, ein(sh.B * T), etg(sh.B * T);
        bool rows_ok = true, targets_ok = true;
        const size_t windows = ranks[0]->eval_windows();
        for (size_t w = 0; w < windows; w++)
            for (size_t m = 0; m < ranks[0]->micro_steps_per_step(); m++)
                for (int r = 0; r < sh.world; r++) {
                    const size_t rows = ranks[r]->read_eval_batch(w, m, ein.data(), etg.data());
                    rows_ok = rows_ok && rows <= sh.B;
                    for (size_t b = 0; b < rows; b++) {
                        seen.push_back(ein[b * T]);
                        targets_ok = targets_ok && etg[b * T] == ein[b * T] + 1;
                    }
                }
        const std::string tag = " (B=" + std::to_string(sh.B) + ", world " + std::to_string(sh.world) + ", " +
                                std::to_string(sh.per_step) + " per step)";
        testing::check("evaluation reads every sequence once, in order" + tag,
                       seen == every && rows_ok && targets_ok && windows == 5 &&
                           ranks[0]->eval_sequences(windows) == 36 && ranks[0]->eval_sequences(2) == 2 * sh.per_step);
        for (DataLoader* l : ranks) delete l;
    }
    // ... without moving the training position (a shuffled loader: its batches continue as its twin's).
    DataLoader c(pattern, 2, T, 0, 1, 6, true, 3), d(pattern, 2, T, 0, 1, 6, true, 3);
    for (int i = 0; i < 4; i++) c.next_batch(ia.data(), tg.data()), d.next_batch(ib.data(), tg.data());
    for (size_t w = 0; w < c.eval_windows(); w++) c.read_eval_batch(w, 1, ia.data(), tg.data());
    ok = true;
    for (int i = 0; i < 12; i++) {
        c.next_batch(ia.data(), tg.data());
        d.next_batch(ib.data(), tg.data());
        ok &= ia == ib;
    }
    testing::check("the evaluation pass leaves the training position alone", ok);
    testing::check("an evaluation micro-step past the window is refused",
                   testing::throws_with([&] { c.read_eval_batch(0, 3, ia.data(), tg.data()); }, "micro-step 3"));
    }

    // Bad shards: each refused with a message naming the problem.
    write_shard(dir + "/bad_magic.bin", s1, 12345);
    testing::check("wrong magic refused", testing::throws_with([&] { read_shard_info(dir + "/bad_magic.bin"); }, "magic"));
    write_shard(dir + "/bad_version.bin", s1, SHARD_MAGIC, 2);
    testing::check("wrong version refused",
                   testing::throws_with([&] { read_shard_info(dir + "/bad_version.bin"); }, "version"));
    write_shard(dir + "/bad_count.bin", s1, SHARD_MAGIC, SHARD_VERSION, (long)s1.size() + 5);
    testing::check("header count larger than the file refused",
                   testing::throws_with([&] { read_shard_info(dir + "/bad_count.bin"); }, "header says"));
    write_shard(dir + "/short.bin", {});
    if (truncate((dir + "/short.bin").c_str(), 100) != 0) return 1;
    testing::check("truncated header refused", testing::throws_with([&] { read_shard_info(dir + "/short.bin"); }, "truncated"));
    testing::check("no match refused", testing::throws_with([&] { DataLoader x(dir + "/nothing_*.bin", 1, T, 0, 1, 1, false, 1); }, "no data files"));
    testing::check("shard smaller than one step refused",
                   testing::throws_with([&] { DataLoader x(pattern, 1, T, 0, 1, 20, false, 1); }, "fewer than one step"));
    testing::check("step not divisible by B x world refused",
                   testing::throws_with([&] { DataLoader x(pattern, 2, T, 0, 2, 6, false, 1); }, "not a multiple"));
    return testing::finish();
}
