// Tokenizer unit tests: known encodings, the invalid-UTF-8 rule, round trips on arbitrary bytes, the two BPE
// implementations agreeing, the decode table (write, read back, header bytes) and bad input files.
// Exactness against the JavaScript reference encoders on the corpus is test/e2e/tokenizer_test.sh.
//
// Usage: test_tokenizer VOCAB_DIR [CORPUS_FILE]   (VOCAB_DIR holds encoder.json and vocab.bpe)
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "llmc/error.h"
#include "llmc/tokenizer.h"
#include "test/fixtures/testing.h"

using llmc::Encoder;
using llmc::Tokenizer;

namespace {

std::string tmp_path(const char* name) { return "/tmp/test_tokenizer_" + std::to_string(getpid()) + "_" + name; }

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Runs f, expecting llmc::Error whose message contains `want`.
template <class F>
void expect_error(const std::string& name, const std::string& want, F f) {
    try {
        f();
        testing::fail(name, "no error (expected one mentioning \"%s\")", want.c_str());
    } catch (const llmc::Error& e) {
        testing::check(name, std::string(e.what()).find(want) != std::string::npos, "message \"%s\" lacks \"%s\"",
                       e.what(), want.c_str());
    }
}

std::string ids_str(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: test_tokenizer VOCAB_DIR [CORPUS_FILE]\n");
        return 2;
    }
    std::string dir = argv[1];
    struct stat st;
    if (stat((dir + "/encoder.json").c_str(), &st) != 0 || stat((dir + "/vocab.bpe").c_str(), &st) != 0) {
        testing::skip("tokenizer_unit", "no encoder.json / vocab.bpe in " + dir + " (dev/data/fetch_tokenizer.sh)");
        return testing::finish();
    }
    Tokenizer tok = Tokenizer::from_gpt2_dir(dir);
    Encoder enc(tok);
    testing::check("vocab_size", tok.vocab_size() == 50257, "got %zu", tok.vocab_size());
    testing::check("eot_id", tok.eot() == 50256 && tok.token_bytes(50256) == "<|endoftext|>", "eot %d", tok.eot());

    // Known GPT-2 encodings (from GPT-2's own encoder).
    testing::check("hello_world", enc.encode("Hello world") == std::vector<int>({15496, 995}), "got %s",
                   ids_str(enc.encode("Hello world")).c_str());
    testing::check("empty", enc.encode("").empty(), "");
    // "<|endoftext|>" in text is ordinary text: it never yields the EOT id.
    std::vector<int> eot_text = enc.encode("a<|endoftext|>b");
    bool has_eot = false;
    for (int id : eot_text) has_eot |= id == tok.eot();
    testing::check("eot_text_is_text", !has_eot && tok.decode(eot_text) == "a<|endoftext|>b", "%s",
                   ids_str(eot_text).c_str());

    // Invalid UTF-8 (docs/tokenizer.md): the pattern runs on each maximal valid segment, and each byte that is not
    // part of a valid sequence is its own byte token. So encode(a + bad + b) == encode(a) + [byte(bad)] + encode(b).
    {
        const auto& d = tok;
        auto byte_id = [&](unsigned char b) { return enc.encode(std::string(1, (char)b))[0]; };
        bool ok = true;
        const char* bads[] = {"\x80", "\xff", "\xc0", "\xfe"};
        for (const char* bad : bads) {
            std::vector<int> want = enc.encode("it's a test");
            want.push_back(byte_id((unsigned char)bad[0]));
            std::vector<int> tail = enc.encode(" of bytes");
            want.insert(want.end(), tail.begin(), tail.end());
            ok &= enc.encode(std::string("it's a test") + bad + " of bytes") == want;
        }
        testing::check("invalid_utf8_splits_segments", ok, "");
        // Truncated, overlong, surrogate and above-U+10FFFF sequences: every byte becomes its own token.
        const char* seqs[] = {"\xe4\xb8", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf0\x9f\x98"};
        ok = true;
        for (const char* s : seqs) {
            std::vector<int> got = enc.encode(s), want;
            for (const char* p = s; *p; p++) want.push_back(byte_id((unsigned char)*p));
            ok &= got == want && d.decode(got) == s;
        }
        testing::check("invalid_utf8_bytes_are_tokens", ok, "");
        testing::check("utf8_validator",
                       llmc::valid_utf8_prefix((const unsigned char*)"ab\xe4\xb8\xad\xed\xa0\x80", 8) == 5 &&
                           llmc::valid_utf8_prefix((const unsigned char*)"\xf0\x9f\x98\x80", 4) == 4 &&
                           llmc::valid_utf8_prefix((const unsigned char*)"\xf4\x8f\xbf\xbf\xf4\x90", 6) == 4,
                       "");
    }

    // decode(encode(x)) == x for arbitrary bytes: random byte strings, random UTF-8-ish strings.
    {
        std::mt19937_64 rng(42);
        const char* pieces[] = {"a", "Z", " ", "  ", "\n", "'s", "1", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xcc\x81",
                                "\xc2\xa0", "!", "\xef\xbb\xbf", "\x80", "\xff", "\t"};
        bool ok = true;
        size_t bad = 0;
        for (int t = 0; t < 2000 && ok; t++) {
            std::string s;
            int n = (int)(rng() % 64);
            for (int i = 0; i < n; i++) {
                if (t % 2) s.push_back((char)(rng() & 0xFF));
                else s += pieces[rng() % (sizeof pieces / sizeof *pieces)];
            }
            if (tok.decode(enc.encode(s)) != s) { ok = false; bad = (size_t)t; }
        }
        testing::check("roundtrip_random_bytes", ok, "case %zu", bad);
    }

    // The scan BPE (GPT-2's algorithm as written) and the heap BPE (used for long pieces) agree.
    {
        std::mt19937_64 rng(7);
        std::vector<std::string> pieces = {"a" + std::string(300, 'a'), std::string(500, ' '),
                                           "supercalifragilisticexpialidocious", " antidisestablishmentarianism",
                                           std::string(200, '9'), "abababababababababababababababab"};
        const char* alphabet = "etaoinshrdlu ETAOIN'.,0123456789";
        for (int t = 0; t < 400; t++) {
            std::string s;
            int n = 1 + (int)(rng() % 200);
            for (int i = 0; i < n; i++) s.push_back(alphabet[rng() % std::strlen(alphabet)]);
            pieces.push_back(s);
        }
        if (argc >= 3) {  // every run of non-space bytes of up to 400 bytes in a corpus file, with its leading space
            std::string text = read_file(argv[2]);
            for (size_t i = 0; i < text.size() && pieces.size() < 20000;) {
                size_t j = text.find(' ', i + 1);
                if (j == std::string::npos) j = text.size();
                if (j - i <= 400) pieces.push_back(text.substr(i, j - i));
                i = j;
            }
        }
        size_t mismatches = 0;
        std::string first;
        for (const std::string& p : pieces) {
            std::vector<int> a, b;
            enc.bpe_scan(p, a);
            enc.bpe_heap(p, b);
            if (a != b && mismatches++ == 0) first = p.substr(0, 60);
        }
        testing::check("bpe_scan_equals_heap", mismatches == 0, "%zu of %zu pieces differ, first \"%s\"", mismatches,
                       pieces.size(), first.c_str());
    }

    // Decode table: write, check the header bytes and size, read back, compare every token.
    {
        std::string path = tmp_path("table.bin");
        tok.write_decode_table(path);
        std::string bytes = read_file(path);
        int32_t header[256] = {};
        if (bytes.size() >= sizeof header) std::memcpy(header, bytes.data(), sizeof header);
        size_t want_size = sizeof header;
        for (size_t i = 0; i < tok.vocab_size(); i++) want_size += 1 + tok.token_bytes((int)i).size();
        testing::check("table_header", header[0] == 20240328 && header[1] == 2 && header[2] == 50257 &&
                                           header[3] == 50256 && header[4] == 0,
                       "header %d %d %d %d", header[0], header[1], header[2], header[3]);
        testing::check("table_size", bytes.size() == want_size, "%zu bytes, expected %zu", bytes.size(), want_size);
        // Token 0 is "!" (one byte), the first record after the header.
        testing::check("table_first_record", bytes.size() > 1026 && bytes[1024] == 1 && bytes[1025] == '!', "");
        Tokenizer back = Tokenizer::from_decode_table(path);
        bool same = back.vocab_size() == tok.vocab_size() && back.eot() == tok.eot() && !back.can_encode();
        for (size_t i = 0; same && i < tok.vocab_size(); i++) same = back.token_bytes((int)i) == tok.token_bytes((int)i);
        testing::check("table_roundtrip", same, "");
        expect_error("table_cannot_encode", "can only decode", [&] { Encoder e(back); });

        // Bad tables: wrong magic, unknown version, truncated, trailing bytes.
        std::string bad = tmp_path("bad.bin");
        std::string b = bytes;
        b[0] ^= 1;
        write_file(bad, b);
        expect_error("table_bad_magic", "bad magic", [&] { Tokenizer::from_decode_table(bad); });
        b = bytes;
        b[4] = 7;
        write_file(bad, b);
        expect_error("table_bad_version", "unsupported version 7", [&] { Tokenizer::from_decode_table(bad); });
        write_file(bad, bytes.substr(0, bytes.size() - 3));
        expect_error("table_truncated", "truncated", [&] { Tokenizer::from_decode_table(bad); });
        write_file(bad, bytes.substr(0, 100));
        expect_error("table_too_small", "too small", [&] { Tokenizer::from_decode_table(bad); });
        write_file(bad, bytes + "xy");
        expect_error("table_trailing", "after the last token", [&] { Tokenizer::from_decode_table(bad); });
        std::remove(bad.c_str());
        std::remove(path.c_str());
        expect_error("table_missing", "cannot open", [&] { Tokenizer::from_decode_table(path); });
    }

    // Bad vocabulary files.
    {
        expect_error("vocab_missing_dir", "fetch_tokenizer.sh", [&] { Tokenizer::from_gpt2_dir("/nonexistent/gpt2"); });
        std::string ej = tmp_path("encoder.json"), vb = tmp_path("vocab.bpe");
        write_file(ej, "{\"a\": 0, ");
        write_file(vb, "#version: 0.2\n");
        expect_error("vocab_bad_json", "not valid JSON", [&] { Tokenizer::from_gpt2_files(ej, vb); });
        write_file(ej, "{\"a\": 5}");
        expect_error("vocab_bad_id", "exactly once", [&] { Tokenizer::from_gpt2_files(ej, vb); });
        std::string good_bpe = read_file(dir + "/vocab.bpe");
        write_file(vb, good_bpe + "Ġ\n");
        expect_error("vocab_bad_merge_line", "expected \"left right\"",
                     [&] { Tokenizer::from_gpt2_files(dir + "/encoder.json", vb); });
        write_file(vb, "#version: 0.2\nxyz# q\n");
        expect_error("vocab_unknown_merge", "not in", [&] { Tokenizer::from_gpt2_files(dir + "/encoder.json", vb); });
        std::remove(ej.c_str());
        std::remove(vb.c_str());
    }
    return testing::finish();
}
