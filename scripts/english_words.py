#!/usr/bin/env python3
"""Is a text mostly real English words? For the quickstart's sample (test/e2e/first_hour_test.sh).

usage: english_words.py TEXT_FILE MIN_FRACTION [WORD_LIST]
Words are the maximal runs of letters (an apostrophe inside a word kept: "don't") of at least 4 letters; a word
counts as English when it is in the word list (default /usr/share/dict/american-english, Debian's wamerican, which
scripts/install_deps.sh installs), compared in lower case. Shorter words are left out: the list holds every single
letter and the function words (the, and, of, was) come out of a model that knows little more than letter statistics,
so a sample of letter soup after 10 steps scored 46% with them and scores 0% without. Prints the fraction and the
words not found; exit 0 when at least MIN_FRACTION of at least 20 such words are English.
"""
import re
import sys

MIN_LETTERS = 4


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2])
    path, min_fraction = sys.argv[1], float(sys.argv[2])
    words_path = sys.argv[3] if len(sys.argv) == 4 else "/usr/share/dict/american-english"
    try:
        known = {w.strip().lower() for w in open(words_path, encoding="utf-8", errors="replace")}
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        sys.exit("error: %s: cannot open (%s)" % (e.filename, e.strerror))
    words = [w.lower() for w in re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)?", text) if len(w) >= MIN_LETTERS]
    if len(words) < 20:
        sys.exit("%s: only %d words of %d letters or more (need 20 to judge)" % (path, len(words), MIN_LETTERS))
    unknown = [w for w in words if w not in known]
    fraction = 1 - len(unknown) / len(words)
    print("%s: %d of %d words of %d+ letters (%.0f%%) are in %s; not found: %s" %
          (path, len(words) - len(unknown), len(words), MIN_LETTERS, 100 * fraction, words_path,
           " ".join(unknown[:30])))
    sys.exit(0 if fraction >= min_fraction else 1)


if __name__ == "__main__":
    main()
