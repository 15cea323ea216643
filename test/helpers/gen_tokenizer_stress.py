#!/usr/bin/env python3
"""Write the tokenizer stress text (valid UTF-8) to stdout: hand-picked hard cases, long runs, and a seeded random
mixture of fragments that puts every kind of character next to every other. The tokenizer test encodes it with the
C++ tokenizer and with the JavaScript references and requires identical tokens.

Characters are taken from Unicode 14 or earlier: PCRE2 (the C++ side) and node's ICU may implement different Unicode
versions, and \\p{L} / \\p{N} of characters assigned later could legitimately differ between them."""
import random
import sys

FRAGMENTS = [
    # contractions (GPT-2's pattern only knows lowercase ASCII ones)
    "it's", "don't", "we're", "I've", "I'm", "we'll", "he'd", "IT'S", "DON'T", "'s", " 's", "''s", "rock'n'roll",
    "it\u2019s", "'ll've", "y'all", "o'clock", "'", "''", "'''", "'re'", " 'd", "'m'll",
    # digits and numbers (\p{N} includes other scripts' digits, fractions, roman numerals, circled numbers)
    "123", "1234567890", " 42", "3.14159", "1,000,000", "\u0663\u0664\u0665", "\u00bd", "\u00b2", "\u216b", "\u2460",
    "2026-11-22", "0x1F", "1e-9", " 007", "\u0967\u0968",
    # whitespace of every kind, including JavaScript's \s set (U+00A0, U+3000, U+2003, U+FEFF) and characters that are
    # not in it (U+0085, U+200B)
    "  ", "   x", "\t\t", "\n\n\n", " \n ", "\r\n", "\u00a0", "\u3000", "\u2003", "\ufeff", "\u0085", "\u200b", "\v", "\f",
    " \u00a0 ", "\u2028", "\u2029", "\u202f", "\u205f", "\u1680",
    # CJK
    "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u3002", "\uff01\uff1f",
    # emoji: single, skin tone, ZWJ family, flags, variation selector
    "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "\U0001F1FA\U0001F1F8\U0001F1EB\U0001F1F7", "\u2764\ufe0f", "\U0001F916", "\U0001F525\U0001F525",
    # combining marks
    "e\u0301", "a\u0308\u0304", "Z\u0334\u0321\u031ba\u0336l\u0337g\u0338o\u0335", "\u0915\u094d\u0937",
    "\u0e01\u0e48", "\u05e9\u05c1\u05b8", " \u0301", "\u0301\u0301",
    # scripts
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u05e9\u05dc\u05d5\u05dd",
    "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u0395\u03bb\u03bb123abc",
    "abc\u041f\u0440\u0438", "\U0001D518\U0001D52B\U0001D526", "\U00010348", "na\u00efve caf\u00e9", "\u00df\u1e9e",
    # punctuation, symbols, markup, code
    "!!!", "...", "\u2014", "\u201cquoted\u201d", "\u00ab\u00bb", "<|endoftext|>", "@#$%^&*()", "http://example.com/a?x=1&y=2",
    "for (int i = 0; i < n; i++) {\n\tx += y;\n}", "<div class=\"a\">", "$$\\frac{a}{b}$$", "--", "\u2026",
    # control characters (valid UTF-8)
    "\x00", "\x01", "\x7f", "\x1b[31m", "\x08",
]

SEPARATORS = ["", "", " ", " ", "  ", "\n", "\t", "\n\n", " \n", "'"]


def main():
    rng = random.Random(20261122)
    parts = []
    # Each fragment on its own, between spaces, and glued to letters and digits.
    for f in FRAGMENTS:
        parts += [f, " " + f + " ", "x" + f + "y", "7" + f + "8", f + f, "\n" + f]
    # Long runs: whitespace, letters (one piece longer than any cache or heap threshold), digits, punctuation, CJK.
    parts += [" " * 3000 + "end", "\n" * 500, " \t" * 200 + "x", "a" * 2000, "supercalifragilistic" * 50,
              "9" * 1000, "!?" * 500, "\u4e2d\u6587" * 200, " " * 17 + "\n" * 3 + " " * 5, "\u00a0" * 100 + "z",
              "\U0001F600" * 100, "ab" * 700]
    # Random mixture.
    for _ in range(6000):
        parts.append(rng.choice(FRAGMENTS) + rng.choice(SEPARATORS))
    sys.stdout.buffer.write("".join(parts).encode("utf-8"))


if __name__ == "__main__":
    main()
