// Printing decoded tokens as they are sampled. A token may end inside a multi-byte UTF-8 character (often with the
// byte-level vocabulary, sometimes with GPT-2's), and a model may emit bytes that are not UTF-8 at all. Utf8Stream
// holds back an incomplete character at the end until the next token completes it, and replaces every byte that
// cannot start or continue a valid character by U+FFFD, so what is printed is always valid UTF-8 (a terminal shows
// no mojibake, grep sees text, not "binary file matches").
//
//   Utf8Stream out;  for each token: print(out.push(tok.decode(&id, 1)));  at the end: print(out.finish());
#pragma once

#include <string>
#include <string_view>

namespace llmc {

class Utf8Stream {
public:
    // Appends `bytes`; returns the text that is complete now.
    std::string push(std::string_view bytes);
    // The end of the stream: a character still incomplete becomes U+FFFD.
    std::string finish();

private:
    std::string pending_;  // the start of an incomplete character (at most 3 bytes)
};

}  // namespace llmc
