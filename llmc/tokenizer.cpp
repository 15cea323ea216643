// GPT-2 byte-level BPE: loading encoder.json / vocab.bpe / llm.c decode tables, encoding and decoding.
// The algorithm and its conventions are described in tokenizer.h and docs/tokenizer.md.
#include "tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "crc32c.h"
#include "error.h"
#include "file_util.h"

namespace llmc {

namespace {

// GPT-2's pre-tokenization pattern. JavaScript's \s (what the reference encoders use) is spelled out because
// PCRE2's \s is a slightly different set (it has U+0085 and lacks U+FEFF); see docs/tokenizer.md.
#define WS "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
const char* const kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";
#undef WS

// GPT-2 writes token bytes as printable characters: bytes that are printable in Latin-1 ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes map, in increasing byte order, to U+0100, U+0101, ...
void byte_unicode_tables(uint32_t byte_to_cp[256], int cp_to_byte[512]) {
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    uint32_t next = 256;
    for (int i = 0; i < 512; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        byte_to_cp[b] = printable(b) ? (uint32_t)b : next++;
        cp_to_byte[byte_to_cp[b]] = b;
    }
}

// Converts a token string in GPT-2's byte alphabet (UTF-8 encoded) back to its raw bytes.
bool alphabet_to_bytes(const std::string& s, const int cp_to_byte[512], std::string* out) {
    out->clear();
    const unsigned char* p = (const unsigned char*)s.data();
    size_t n = s.size(), i = 0;
    while (i < n) {
        uint32_t cp;
        if (p[i] < 0x80) { cp = p[i]; i += 1; }
        else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n) { cp = ((p[i] & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu); i += 2; }
        else return false;  // the alphabet only uses code points below U+0800
        if (cp >= 512 || cp_to_byte[cp] < 0) return false;
        out->push_back((char)cp_to_byte[cp]);
    }
    return true;
}

// A 64-bit hash of a byte string (not cryptographic): 8 bytes at a time, multiply and fold.
inline uint64_t hash_bytes(const char* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h | 1;  // 0 marks an empty slot
}

}  // namespace

// (left token, right token) -> (merge rank, merged token): open addressing with linear probing.
class PairMap {
public:
    struct Merge { uint32_t rank; int merged; };
    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < 2 * n) cap *= 2;
        slots_.assign(cap, Slot{});
        mask_ = cap - 1;
    }
    bool insert(int a, int b, uint32_t rank, int merged) {  // false if the pair is already present
        uint64_t key = pack(a, b);
        for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return false;
            if (slots_[i].key == kEmpty) { slots_[i] = Slot{key, {rank, merged}}; return true; }
        }
    }
    const Merge* find(int a, int b) const {
        uint64_t key = pack(a, b);
        for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i].merge;
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }

private:
    static constexpr uint64_t kEmpty = ~0ull;
    struct Slot { uint64_t key = kEmpty; Merge merge{}; };
    static uint64_t pack(int a, int b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
    size_t slot_of(uint64_t key) const { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

struct TokenizerData {
    std::vector<std::string> tokens;  // id -> bytes
    int eot = -1;
    bool can_encode = false;
    int byte_token[256] = {};  // byte -> id of its single-byte token
    PairMap merges;
    // True when every merge's inputs were created by lower-ranked merges (GPT-2's file is in learning order). Then
    // a merge never creates a pair ranked below the one just merged, and the priority-queue BPE is exact.
    bool ranks_ordered = false;
    pcre2_code* regex = nullptr;
    bool jit = false;
    ~TokenizerData() { if (regex) pcre2_code_free(regex); }
};

// ---- loading --------------------------------------------------------------------------------------------------

static std::string read_text_file(const std::string& path) {
    size_t size = file_size_or_fail(path);
    FILE* f = open_or_fail(path, "rb");
    std::string s(size, '\0');
    try { read_exact(f, &s[0], size, path); } catch (...) { std::fclose(f); throw; }
    std::fclose(f);
    return s;
}

static void compile_regex(TokenizerData& d) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    d.regex = pcre2_compile((PCRE2_SPTR)kPattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &err_off, nullptr);
    if (!d.regex) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fail("tokenizer: cannot compile the pre-tokenization pattern at offset %zu: %s", (size_t)err_off, (char*)msg);
    }
    // JIT is an optimization: without it (a PCRE2 built without JIT support) the interpreter gives the same matches.
    d.jit = pcre2_jit_compile(d.regex, PCRE2_JIT_COMPLETE) == 0;
}

// Well-formed files can still be the wrong ones: a vocab.bpe cut at a line boundary parses and silently tokenizes
// differently (the missing merges never apply). So the vocabulary must be GPT-2's exactly: 50257 tokens (256
// bytes, 50000 merges, <|endoftext|> = 50256), and digests of its content (not of the files' bytes, so any
// formatting of the same JSON passes) equal to those of GPT-2's files: CRC-32C over every token's length (uint16)
// and bytes in id order, and over the (left id, right id) uint32 pairs of the merges in rank order.
static void check_gpt2_vocabulary(const TokenizerData& d, size_t merges, uint32_t merges_digest,
                                  const std::string& encoder_json, const std::string& vocab_bpe) {
    constexpr size_t GPT2_TOKENS = 50257, GPT2_MERGES = 50000;
    constexpr uint32_t GPT2_TOKENS_DIGEST = 0x6c92178cu, GPT2_MERGES_DIGEST = 0x98647115u;
    const char* refetch = "fetch GPT-2's files again with dev/data/fetch_tokenizer.sh";
    if (d.tokens.size() != GPT2_TOKENS)
        fail("%s: %zu tokens, GPT-2's vocabulary has %zu (not GPT-2's file; %s)", encoder_json.c_str(),
             d.tokens.size(), GPT2_TOKENS, refetch);
    if (merges != GPT2_MERGES)
        fail("%s: %zu merges, GPT-2's vocabulary has %zu (the file is cut short or not GPT-2's; %s)", vocab_bpe.c_str(),
             merges, GPT2_MERGES, refetch);
    if (d.eot != GPT2_EOT)
        fail("%s: <|endoftext|> is id %d, GPT-2's is %d (%s)", encoder_json.c_str(), d.eot, GPT2_EOT, refetch);
    uint32_t tokens_digest = 0;
    for (const std::string& t : d.tokens) {
        const uint16_t len = (uint16_t)t.size();
        tokens_digest = crc32c(crc32c(tokens_digest, &len, sizeof len), t.data(), t.size());
    }
    if (tokens_digest != GPT2_TOKENS_DIGEST)
        fail("%s: the tokens differ from GPT-2's (content digest %08x, GPT-2's is %08x; %s)", encoder_json.c_str(),
             tokens_digest, GPT2_TOKENS_DIGEST, refetch);
    if (merges_digest != GPT2_MERGES_DIGEST)
        fail("%s: the merges differ from GPT-2's (content digest %08x, GPT-2's is %08x; %s)", vocab_bpe.c_str(),
             merges_digest, GPT2_MERGES_DIGEST, refetch);
}

// encoder.json: {"token in the byte alphabet": id, ...} with ids 0..V-1, each exactly once. Fills d's tokens,
// byte tokens and EOT; returns the id of each token's bytes.
static std::unordered_map<std::string, int> read_gpt2_encoder(const std::string& encoder_json, const int* cp_to_byte,
                                                              TokenizerData* d) {
    nlohmann::json enc;
    try {
        enc = nlohmann::json::parse(read_text_file(encoder_json));
    } catch (const nlohmann::json::exception& e) {
        fail("%s: not valid JSON (%s)", encoder_json.c_str(), e.what());
    }
    if (!enc.is_object() || enc.empty())
        fail("%s: expected a JSON object mapping token strings to ids", encoder_json.c_str());
    size_t V = enc.size();
    d->tokens.assign(V, std::string());
    std::vector<bool> seen(V, false);
    std::unordered_map<std::string, int> id_of;
    id_of.reserve(V * 2);
    std::string bytes;
    for (auto it = enc.begin(); it != enc.end(); ++it) {
        if (!it.value().is_number_integer())
            fail("%s: token \"%s\" has a non-integer id", encoder_json.c_str(), it.key().c_str());
        long long id = it.value().get<long long>();
        if (id < 0 || (size_t)id >= V || seen[id])
            fail("%s: token \"%s\" has id %lld (expected each id in [0, %zu) exactly once)", encoder_json.c_str(),
                 it.key().c_str(), id, V);
        if (!alphabet_to_bytes(it.key(), cp_to_byte, &bytes) || bytes.empty())
            fail("%s: token \"%s\" (id %lld) uses characters outside GPT-2's byte alphabet", encoder_json.c_str(),
                 it.key().c_str(), id);
        if (bytes.size() > 255)
            fail("%s: token id %lld is %zu bytes long (at most 255 fit the decode table)", encoder_json.c_str(), id,
                 bytes.size());
        seen[id] = true;
        d->tokens[id] = bytes;
        if (!id_of.emplace(bytes, (int)id).second)
            fail("%s: token id %lld repeats the bytes of id %d", encoder_json.c_str(), id, id_of[bytes]);
    }
    for (int b = 0; b < 256; b++) {
        auto it = id_of.find(std::string(1, (char)b));
        if (it == id_of.end()) fail("%s: no token for the single byte 0x%02x", encoder_json.c_str(), b);
        d->byte_token[b] = it->second;
    }
    auto eot = id_of.find("<|endoftext|>");
    if (eot == id_of.end()) fail("%s: no <|endoftext|> token", encoder_json.c_str());
    d->eot = eot->second;
    return id_of;
}

// vocab.bpe: "#version: ..." then one merge "left right" per line; the line order is the merge rank.
static std::vector<std::pair<std::string, std::string>> read_gpt2_merge_lines(const std::string& vocab_bpe) {
    std::string text = read_text_file(vocab_bpe);
    std::vector<std::pair<std::string, std::string>> lines;
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
            fail("%s:%zu: expected \"left right\", got \"%s\"", vocab_bpe.c_str(), line_no, line.c_str());
        lines.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    return lines;
}

Tokenizer Tokenizer::from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe) {
    auto d = std::make_shared<TokenizerData>();
    uint32_t byte_to_cp[256];
    int cp_to_byte[512];
    byte_unicode_tables(byte_to_cp, cp_to_byte);
    const std::unordered_map<std::string, int> id_of = read_gpt2_encoder(encoder_json, cp_to_byte, d.get());
    const size_t V = d->tokens.size();
    const std::vector<std::pair<std::string, std::string>> lines = read_gpt2_merge_lines(vocab_bpe);
    if (lines.empty()) fail("%s: no merges", vocab_bpe.c_str());
    d->merges.reserve(lines.size());
    // creation_rank[id]: rank of the merge that makes token id (-1 for byte tokens); to check the file's order.
    std::vector<long long> creation_rank(V, (long long)lines.size());
    for (int b = 0; b < 256; b++) creation_rank[d->byte_token[b]] = -1;
    d->ranks_ordered = true;
    std::string left, right;
    uint32_t merges_digest = 0;  // over the (left id, right id) pairs in rank order: GPT-2's check below
    for (size_t r = 0; r < lines.size(); r++) {
        const auto& [ls, rs] = lines[r];
        if (!alphabet_to_bytes(ls, cp_to_byte, &left) || !alphabet_to_bytes(rs, cp_to_byte, &right))
            fail("%s: merge %zu \"%s %s\" uses characters outside GPT-2's byte alphabet", vocab_bpe.c_str(), r, ls.c_str(),
                 rs.c_str());
        auto a = id_of.find(left), b = id_of.find(right), m = id_of.find(left + right);
        if (a == id_of.end() || b == id_of.end() || m == id_of.end())
            fail("%s: merge %zu \"%s %s\": %s is not in %s", vocab_bpe.c_str(), r, ls.c_str(), rs.c_str(),
                 a == id_of.end() ? "the left part" : b == id_of.end() ? "the right part" : "the merged token",
                 encoder_json.c_str());
        if (!d->merges.insert(a->second, b->second, (uint32_t)r, m->second))
            fail("%s: merge %zu \"%s %s\" appears twice", vocab_bpe.c_str(), r, ls.c_str(), rs.c_str());
        const uint32_t pair[2] = {(uint32_t)a->second, (uint32_t)b->second};
        merges_digest = crc32c(merges_digest, pair, sizeof pair);
        if (creation_rank[a->second] >= (long long)r || creation_rank[b->second] >= (long long)r) d->ranks_ordered = false;
        creation_rank[m->second] = std::min(creation_rank[m->second], (long long)r);
    }
    check_gpt2_vocabulary(*d, lines.size(), merges_digest, encoder_json, vocab_bpe);
    compile_regex(*d);
    d->can_encode = true;
    Tokenizer t;
    t.data_ = d;
    return t;
}

Tokenizer Tokenizer::from_gpt2_dir(const std::string& dir) {
    std::string e = dir + "/encoder.json", v = dir + "/vocab.bpe";
    for (const std::string& p : {e, v}) {
        std::FILE* f = std::fopen(p.c_str(), "rb");
        if (!f) fail("%s: cannot open (%s); run dev/data/fetch_tokenizer.sh to fetch GPT-2's tokenizer files", p.c_str(),
                     std::strerror(errno));
        std::fclose(f);
    }
    return from_gpt2_files(e, v);
}

Tokenizer Tokenizer::from_decode_table(const std::string& path) {
    size_t size = file_size_or_fail(path);
    FILE* f = open_or_fail(path, "rb");
    auto d = std::make_shared<TokenizerData>();
    try {
        int32_t header[256];
        if (size < sizeof header) fail("%s: %zu bytes, too small for the 1024-byte header", path.c_str(), size);
        read_exact(f, header, sizeof header, path);
        if (header[0] != TOKENIZER_MAGIC)
            fail("%s: bad magic %d (expected %d, an llm.c tokenizer file)", path.c_str(), header[0], TOKENIZER_MAGIC);
        if (header[1] != 1 && header[1] != 2)
            fail("%s: unsupported version %d (expected 1 or 2)", path.c_str(), header[1]);
        if (header[2] <= 0 || header[2] > (1 << 24))
            fail("%s: vocab size %d (expected 1 .. %d)", path.c_str(), header[2], 1 << 24);
        size_t V = (size_t)header[2];
        d->eot = header[1] == 1 ? GPT2_EOT : header[3];  // version 1 predates the EOT field
        if (d->eot < 0 || (size_t)d->eot >= V)
            fail("%s: EOT id %d outside the vocabulary [0, %zu)", path.c_str(), d->eot, V);
        d->tokens.resize(V);
        size_t offset = sizeof header;
        for (size_t i = 0; i < V; i++) {
            unsigned char len = 0;
            if (offset + 1 > size) fail("%s: truncated at token %zu of %zu", path.c_str(), i, V);
            read_exact(f, &len, 1, path);
            if (len == 0) fail("%s: token %zu has length 0 (expected 1..255)", path.c_str(), i);
            if (offset + 1 + len > size) fail("%s: truncated at token %zu of %zu", path.c_str(), i, V);
            d->tokens[i].resize(len);
            read_exact(f, &d->tokens[i][0], len, path);
            offset += 1 + len;
        }
        if (offset != size)
            fail("%s: %zu bytes after the last token (expected the file to end at byte %zu)", path.c_str(),
                 size - offset, offset);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
    Tokenizer t;
    t.data_ = d;
    return t;
}

Tokenizer Tokenizer::bytes() {
    auto d = std::make_shared<TokenizerData>();
    for (int b = 0; b < BYTE_VOCAB_SIZE; b++) {
        d->tokens.push_back(std::string(1, (char)b));
        d->byte_token[b] = b;
    }
    d->eot = BYTE_EOT;
    Tokenizer t;
    t.data_ = d;
    return t;
}

std::vector<int> encode_bytes(std::string_view text) {
    std::vector<int> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
}

void Tokenizer::write_decode_table(const std::string& path) const {
    const TokenizerData& d = *data_;
    write_atomically(path, [&](FILE* f) {
        int32_t header[256] = {};
        header[0] = TOKENIZER_MAGIC;
        header[1] = TOKENIZER_VERSION;
        header[2] = (int32_t)d.tokens.size();
        header[3] = d.eot;
        write_exact(f, header, sizeof header, path);
        for (size_t i = 0; i < d.tokens.size(); i++) {
            const std::string& t = d.tokens[i];
            if (t.empty() || t.size() > 255)
                fail("%s: token %zu is %zu bytes (the decode table stores 1..255)", path.c_str(), i, t.size());
            unsigned char len = (unsigned char)t.size();
            write_exact(f, &len, 1, path);
            write_exact(f, t.data(), t.size(), path);
        }
    });
}

// ---- queries and decoding -------------------------------------------------------------------------------------

size_t Tokenizer::vocab_size() const { return data_->tokens.size(); }
int Tokenizer::eot() const { return data_->eot; }
bool Tokenizer::can_encode() const { return data_->can_encode; }

const std::string& Tokenizer::token_bytes(int id) const {
    if (id < 0 || (size_t)id >= data_->tokens.size())
        fail("token id %d outside the vocabulary [0, %zu)", id, data_->tokens.size());
    return data_->tokens[id];
}

std::string Tokenizer::decode(const int* ids, size_t n) const {
    std::string out;
    for (size_t i = 0; i < n; i++) out += token_bytes(ids[i]);
    return out;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
    Encoder enc(*this);
    return enc.encode(text);
}

// ---- UTF-8 validation -----------------------------------------------------------------------------------------

size_t valid_utf8_prefix(const unsigned char* s, size_t n) {
    size_t i = 0;
    while (i < n) {
        // ASCII fast path: 8 bytes at a time while none has the high bit.
        while (i + 8 <= n) {
            uint64_t w;
            std::memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }  // overlong; surrogates
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }  // overlong; > U+10FFFF
        else return i;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += len;
    }
    return n;
}

// ---- encoding -------------------------------------------------------------------------------------------------

struct Encoder::State {
    pcre2_match_data* match = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
    // Piece cache: open addressing; keys (piece bytes) live in `keys`, values (token runs) in `values`.
    struct Slot { uint64_t hash = 0; size_t key_off = 0; uint32_t key_len = 0, val_len = 0; size_t val_off = 0; };
    std::vector<Slot> slots;
    size_t used = 0;
    std::string keys;
    std::vector<int> values;
    size_t max_tokens = 0;

    void reset_cache() {
        slots.assign(4096, Slot{});
        used = 0;
        keys.clear();
        values.clear();
    }
    size_t probe(uint64_t h, const char* s, size_t n) const {  // slot holding the key, or the empty slot for it
        size_t mask = slots.size() - 1;
        for (size_t i = (size_t)(h >> 7) & mask;; i = (i + 1) & mask) {
            const Slot& sl = slots[i];
            if (sl.hash == 0) return i;
            if (sl.hash == h && sl.key_len == n && std::memcmp(keys.data() + sl.key_off, s, n) == 0) return i;
        }
    }
    void grow() {
        std::vector<Slot> old;
        old.swap(slots);
        slots.assign(old.size() * 2, Slot{});
        for (const Slot& sl : old)
            if (sl.hash) slots[probe(sl.hash, keys.data() + sl.key_off, sl.key_len)] = sl;
    }
};

Encoder::Encoder(const Tokenizer& tokenizer, size_t max_cache_tokens)
    : data_(std::shared_ptr<const TokenizerData>(&tokenizer.data(), [](const TokenizerData*) {})),
      state_(std::make_unique<State>()) {
    if (!tokenizer.can_encode())
        fail("this tokenizer was loaded from a decode table and can only decode; load encoder.json and vocab.bpe "
             "(dev/data/fetch_tokenizer.sh) to encode");
    State& st = *state_;
    st.match = pcre2_match_data_create(1, nullptr);
    st.context = pcre2_match_context_create(nullptr);
    // The default 32 KiB JIT stack is enough for this pattern's backtracking, but a larger one costs nothing.
    st.jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    if (!st.match || !st.context || !st.jit_stack) fail("tokenizer: out of memory creating PCRE2 match state");
    pcre2_jit_stack_assign(st.context, nullptr, st.jit_stack);
    st.max_tokens = max_cache_tokens;
    st.reset_cache();
}

Encoder::~Encoder() {
    if (state_) {
        pcre2_match_data_free(state_->match);
        pcre2_match_context_free(state_->context);
        pcre2_jit_stack_free(state_->jit_stack);
    }
}

void Encoder::encode(std::string_view text, std::vector<int>& out) {
    const unsigned char* s = (const unsigned char*)text.data();
    size_t n = text.size(), i = 0;
    while (i < n) {
        size_t valid = valid_utf8_prefix(s + i, n - i);
        if (valid) encode_valid_utf8((const char*)s + i, valid, out);
        i += valid;
        if (i < n) out.push_back(data_->byte_token[s[i++]]);  // a byte outside valid UTF-8: its own token
    }
}

void Encoder::encode_valid_utf8(const char* s, size_t n, std::vector<int>& out) {
    const TokenizerData& d = *data_;
    State& st = *state_;
    size_t off = 0;
    while (off < n) {
        int rc = d.jit ? pcre2_jit_match(d.regex, (PCRE2_SPTR)s, n, off, 0, st.match, st.context)
                       : pcre2_match(d.regex, (PCRE2_SPTR)s, n, off, PCRE2_NO_UTF_CHECK, st.match, st.context);
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            fail("tokenizer: pre-tokenization failed at byte %zu: %s", off, (char*)msg);
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.match);
        // Every character is covered by some alternative and none matches empty, so matches tile the text.
        if (ov[0] != off || ov[1] <= ov[0])
            fail("tokenizer: internal error: pre-tokenization left a gap at byte %zu", off);
        encode_piece(s + off, ov[1] - off, out);
        off = ov[1];
    }
}

void Encoder::encode_piece(const char* s, size_t n, std::vector<int>& out) {
    if (n == 1) {
        out.push_back(data_->byte_token[(unsigned char)s[0]]);
        return;
    }
    State& st = *state_;
    uint64_t h = hash_bytes(s, n);
    size_t slot = st.probe(h, s, n);
    if (st.slots[slot].hash) {
        const State::Slot& sl = st.slots[slot];
        out.insert(out.end(), st.values.begin() + sl.val_off, st.values.begin() + sl.val_off + sl.val_len);
        return;
    }
    size_t first = out.size();
    bpe(std::string_view(s, n), out);
    if (st.values.size() + (out.size() - first) > st.max_tokens) {
        st.reset_cache();  // bounded memory: start over rather than evict piece by piece
        slot = st.probe(h, s, n);
    }
    State::Slot sl;
    sl.hash = h;
    sl.key_off = st.keys.size();
    sl.key_len = (uint32_t)n;
    sl.val_off = st.values.size();
    sl.val_len = (uint32_t)(out.size() - first);
    st.keys.append(s, n);
    st.values.insert(st.values.end(), out.begin() + first, out.end());
    st.slots[slot] = sl;
    if (++st.used * 2 > st.slots.size()) st.grow();
}

// Pieces up to this many bytes use the scan (cheap for short words); longer ones the priority queue.
static constexpr size_t kHeapThreshold = 48;

void Encoder::bpe(std::string_view piece, std::vector<int>& out) {
    if (piece.size() > kHeapThreshold && data_->ranks_ordered) bpe_heap(piece, out);
    else bpe_scan(piece, out);
}

// GPT-2's BPE as written: find the lowest-ranked adjacent pair, merge all its occurrences left to right, repeat.
// O(n^2) pair look-ups for a piece of n bytes.
void Encoder::bpe_scan(std::string_view piece, std::vector<int>& out) const {
    const TokenizerData& d = *data_;
    std::vector<int> ids(piece.size());
    for (size_t i = 0; i < piece.size(); i++) ids[i] = d.byte_token[(unsigned char)piece[i]];
    while (ids.size() >= 2) {
        uint32_t best = UINT32_MAX;
        int a = 0, b = 0, merged = 0;
        for (size_t i = 0; i + 1 < ids.size(); i++) {
            const PairMap::Merge* m = d.merges.find(ids[i], ids[i + 1]);
            if (m && m->rank < best) { best = m->rank; a = ids[i]; b = ids[i + 1]; merged = m->merged; }
        }
        if (best == UINT32_MAX) break;
        size_t w = 0;
        for (size_t i = 0; i < ids.size();) {
            if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) { ids[w++] = merged; i += 2; }
            else ids[w++] = ids[i++];
        }
        ids.resize(w);
    }
    out.insert(out.end(), ids.begin(), ids.end());
}

// The same result in O(n log n): a doubly linked list of tokens and a min-heap of (rank, position) for adjacent
// pairs. Entries go stale when a neighbour merges; they are recognised by re-looking up the pair. Equal ranks pop in
// position order, which is GPT-2's left-to-right pass, and since merges only create pairs of higher rank
// (ranks_ordered), popping the global minimum reproduces the scan's order exactly.
void Encoder::bpe_heap(std::string_view piece, std::vector<int>& out) const {
    const TokenizerData& d = *data_;
    size_t n = piece.size();
    if (n == 0) return;
    std::vector<int> id(n);
    std::vector<int64_t> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (size_t i = 0; i < n; i++) {
        id[i] = d.byte_token[(unsigned char)piece[i]];
        prev[i] = (int64_t)i - 1;
        next[i] = i + 1 < n ? (int64_t)i + 1 : -1;
    }
    using Entry = std::pair<uint32_t, size_t>;  // (rank, position of the left token)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto push = [&](int64_t left) {
        if (left < 0 || next[left] < 0) return;
        if (const PairMap::Merge* m = d.merges.find(id[left], id[next[left]])) heap.push({m->rank, (size_t)left});
    };
    for (size_t i = 0; i + 1 < n; i++) push((int64_t)i);
    while (!heap.empty()) {
        auto [rank, pos] = heap.top();
        heap.pop();
        if (!alive[pos] || next[pos] < 0) continue;
        const PairMap::Merge* m = d.merges.find(id[pos], id[next[pos]]);
        if (!m || m->rank != rank) continue;  // stale: this position's pair changed since it was pushed
        int64_t right = next[pos];
        id[pos] = m->merged;
        alive[right] = 0;
        next[pos] = next[right];
        if (next[right] >= 0) prev[next[right]] = (int64_t)pos;
        push(prev[pos]);
        push((int64_t)pos);
    }
    for (int64_t i = 0; i >= 0; i = next[i]) out.push_back(id[i]);
}

}  // namespace llmc
