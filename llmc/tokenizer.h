// GPT-2's byte-level BPE tokenizer: encode UTF-8 text into token ids and decode ids back into bytes.
//
// Encoding follows GPT-2 (see docs/tokenizer.md for the full description):
//   1. pre-tokenization: the text is split into pieces by GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (PCRE2 in UTF mode, JIT-compiled where available; \s is spelled out as the whitespace set of the JavaScript
//      reference encoders the tests compare against);
//   2. each piece's UTF-8 bytes start as one token per byte (GPT-2's 256 byte tokens);
//   3. BPE: repeatedly merge the adjacent pair with the lowest merge rank in vocab.bpe (all its occurrences, left to
//      right) until no adjacent pair has a merge. Results for repeated pieces come from a per-Encoder cache.
// Invalid UTF-8 is handled deliberately: the regex runs on each maximal valid UTF-8 segment, and every byte that is
// not part of a valid sequence becomes its own byte token. So decode(encode(x)) == x for ANY byte string.
// "<|endoftext|>" in the text is ordinary text (as in GPT-2's encoder); the EOT id is added by callers.
//
// Files: GPT-2's own encoder.json (token string -> id, strings in GPT-2's byte-to-unicode alphabet) and vocab.bpe
// (one merge "a b" per line, in rank order) for encoding; llm.c's decode table (magic 20240328) for decoding only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

constexpr int TOKENIZER_MAGIC = 20240328;
constexpr int TOKENIZER_VERSION = 2;  // header [2] = vocab size, [3] = EOT id; version 1 (no [3]) is read too
constexpr int GPT2_EOT = 50256;       // <|endoftext|>: the document separator in data shards

struct TokenizerData;  // vocabulary, merges and compiled regex (tokenizer.cpp)

class Tokenizer {
public:
    // Encoder + decoder from GPT-2's encoder.json and vocab.bpe. Fails naming the file on anything malformed.
    static Tokenizer from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe);
    // Same, from `dir`/encoder.json and `dir`/vocab.bpe (as fetched by dev/data/fetch_tokenizer.sh into data/gpt2).
    static Tokenizer from_gpt2_dir(const std::string& dir);
    // Decoder only, from llm.c's decode table file (see write_decode_table).
    static Tokenizer from_decode_table(const std::string& path);
    // The byte-level vocabulary (prepare_data --bytes): V = 256, token i is byte i, and byte 0 (NUL, never part of
    // text) is the document separator, so EOT = 0. Decode only; encode_bytes() is its encoder.
    static Tokenizer bytes();

    // llm.c's decode table: 256 x int32 header [0]=20240328 [1]=2 [2]=vocab size [3]=EOT id; then for each token id
    // in order a uint8 length followed by that many bytes. Written atomically.
    void write_decode_table(const std::string& path) const;

    size_t vocab_size() const;
    int eot() const;
    bool can_encode() const;  // false for a tokenizer loaded from a decode table
    // The bytes of one token; fails on an id outside [0, vocab_size).
    const std::string& token_bytes(int id) const;
    // Concatenated bytes of the tokens (may be invalid UTF-8 when a multi-byte character is split across tokens).
    std::string decode(const int* ids, size_t n) const;
    std::string decode(const std::vector<int>& ids) const { return decode(ids.data(), ids.size()); }
    // Convenience: encodes with a temporary Encoder (no cache reuse). Use an Encoder for repeated calls.
    std::vector<int> encode(std::string_view text) const;

    const TokenizerData& data() const { return *data_; }

private:
    std::shared_ptr<const TokenizerData> data_;
};

// Per-thread encoding state: PCRE2 match data, JIT stack and the piece -> tokens cache. An Encoder is not
// thread-safe; give each thread its own (they share the Tokenizer's read-only data).
class Encoder {
public:
    // max_cache_tokens bounds the cache (it is cleared when its stored token count exceeds this).
    explicit Encoder(const Tokenizer& tokenizer, size_t max_cache_tokens = size_t(1) << 22);
    ~Encoder();
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;

    // Appends the tokens of `text` to `out`.
    void encode(std::string_view text, std::vector<int>& out);
    std::vector<int> encode(std::string_view text) {
        std::vector<int> out;
        encode(text, out);
        return out;
    }

    // BPE of one piece's bytes (no pre-tokenization, no cache): appended to `out`. Exposed for tests.
    void bpe(std::string_view piece, std::vector<int>& out);
    // The two BPE implementations behind bpe() (a scan per merge for short pieces, a priority queue for long ones),
    // exposed so tests can check they agree.
    void bpe_scan(std::string_view piece, std::vector<int>& out) const;
    void bpe_heap(std::string_view piece, std::vector<int>& out) const;

private:
    struct State;
    std::shared_ptr<const TokenizerData> data_;
    std::unique_ptr<State> state_;
    void encode_valid_utf8(const char* s, size_t n, std::vector<int>& out);
    void encode_piece(const char* s, size_t n, std::vector<int>& out);
};

constexpr int BYTE_VOCAB_SIZE = 256;
constexpr int BYTE_EOT = 0;
// The byte-level vocabulary's encoding: one token per byte (BYTE_EOT is not added).
std::vector<int> encode_bytes(std::string_view text);

// Length of the longest prefix of s[0, n) that is valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF, no truncated sequence).
size_t valid_utf8_prefix(const unsigned char* s, size_t n);

}  // namespace llmc
