// UTF-8-safe streaming of decoded bytes (see utf8_stream.h).
#include "utf8_stream.h"

#include "tokenizer.h"

namespace llmc {

namespace {

const char* const REPLACEMENT = "\xEF\xBF\xBD";  // U+FFFD

// Bytes a sequence starting with `lead` has (RFC 3629), 0 when `lead` cannot start one.
size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

// True when s[0, n), shorter than its lead byte's sequence, can still be completed into a valid character: the
// second byte has the range its lead allows (no overlong forms, no surrogates, nothing above U+10FFFF), later ones
// are continuation bytes.
bool valid_incomplete(const unsigned char* s, size_t n) {
    const size_t want = sequence_length(s[0]);
    if (want < 2 || n >= want) return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (i == 1 && s[0] == 0xE0) lo = 0xA0;
        if (i == 1 && s[0] == 0xED) hi = 0x9F;
        if (i == 1 && s[0] == 0xF0) lo = 0x90;
        if (i == 1 && s[0] == 0xF4) hi = 0x8F;
        if (s[i] < lo || s[i] > hi) return false;
    }
    return true;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
    std::string buf = pending_;
    buf.append(bytes.data(), bytes.size());
    pending_.clear();
    const unsigned char* s = reinterpret_cast<const unsigned char*>(buf.data());
    std::string out;
    size_t pos = 0;
    while (pos < buf.size()) {
        const size_t ok = valid_utf8_prefix(s + pos, buf.size() - pos);
        out.append(buf, pos, ok);
        pos += ok;
        if (pos == buf.size()) break;
        if (valid_incomplete(s + pos, buf.size() - pos)) {  // the rest may be completed by the next token
            pending_ = buf.substr(pos);
            break;
        }
        out += REPLACEMENT;  // a byte that no continuation can make valid
        pos++;
    }
    return out;
}

std::string Utf8Stream::finish() {
    const bool held = !pending_.empty();
    pending_.clear();
    return held ? REPLACEMENT : "";
}

}  // namespace llmc
