// llmc/utf8_stream.h: decoded tokens printed as they come stay valid UTF-8: a character split across tokens is held
// back and printed whole, bytes that cannot be UTF-8 become U+FFFD, an unfinished character at the end becomes
// U+FFFD; plus the byte-level vocabulary (Tokenizer::bytes, encode_bytes).
#include <string>
#include <vector>

#include "llmc/tokenizer.h"
#include "llmc/utf8_stream.h"
#include "test/fixtures/testing.h"

using llmc::Utf8Stream;

namespace {
const std::string FFFD = "\xEF\xBF\xBD";

// Feeds `pieces` one by one; returns everything printed, and whether every output chunk was valid UTF-8 on its own.
std::string stream(const std::vector<std::string>& pieces, bool* each_valid) {
    Utf8Stream s;
    std::string all;
    *each_valid = true;
    auto add = [&](const std::string& chunk) {
        *each_valid &= llmc::valid_utf8_prefix((const unsigned char*)chunk.data(), chunk.size()) == chunk.size();
        all += chunk;
    };
    for (const std::string& p : pieces) add(s.push(p));
    add(s.finish());
    return all;
}

void expect(const char* name, const std::vector<std::string>& pieces, const std::string& want) {
    bool valid = false;
    const std::string got = stream(pieces, &valid);
    testing::check(name, got == want && valid, "got '%s' (%zu bytes), want '%s'; every chunk valid: %d", got.c_str(),
                   got.size(), want.c_str(), valid);
}
}  // namespace

int main() {
    expect("ascii passes through", {"Hello", ", ", "world"}, "Hello, world");
    expect("a 2-byte character split across tokens is printed whole", {"caf", "\xC3", "\xA9!"}, "caf\xC3\xA9!");
    expect("a 4-byte character fed byte by byte", {"\xF0", "\x9F", "\x98", "\x80"}, "\xF0\x9F\x98\x80");
    expect("a stray continuation byte becomes U+FFFD", {"a\x80", "b"}, "a" + FFFD + "b");
    expect("an impossible lead byte (0xFF) becomes U+FFFD", {"\xFF", "x"}, FFFD + "x");
    expect("an overlong lead (0xC0) becomes U+FFFD", {"\xC0\xAF"}, FFFD + FFFD);
    expect("a lead followed by ASCII: U+FFFD, then the ASCII", {"\xE2\x82", "A"}, FFFD + FFFD + "A");
    expect("a surrogate start (ED A0) is not held back", {"\xED\xA0"}, FFFD + FFFD);
    expect("an unfinished character at the end becomes U+FFFD", {"ok", "\xE2\x82"}, "ok" + FFFD);
    {
        Utf8Stream s;
        const std::string first = s.push("ab\xE2\x82");
        testing::check("an incomplete character is held back, not printed", first == "ab", "got '%s'", first.c_str());
        const std::string second = s.push("\xAC");
        testing::check("and printed when the next token completes it", second == "\xE2\x82\xAC", "got '%s'",
                       second.c_str());
    }
    // The byte-level vocabulary: V = 256, token i is byte i, EOT is byte 0.
    llmc::Tokenizer bytes = llmc::Tokenizer::bytes();
    testing::check("byte vocabulary: 256 tokens, EOT 0", bytes.vocab_size() == 256 && bytes.eot() == 0, "V %zu EOT %d",
                   bytes.vocab_size(), bytes.eot());
    const std::string text = "Na\xC3\xAFve caf\xC3\xA9 \xE2\x82\xAC";
    const std::vector<int> ids = llmc::encode_bytes(text);
    testing::check("encode_bytes: one token per byte, decode gives the bytes back",
                   ids.size() == text.size() && ids[2] == 0xC3 && bytes.decode(ids) == text, "");
    return testing::finish();
}
