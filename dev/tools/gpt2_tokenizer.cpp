// gpt2_tokenizer: GPT-2's tokenizer on the command line.
//
//   ./gpt2_tokenizer encode [FILE...]     UTF-8 text -> token ids (stdin -> one line; each FILE -> one line)
//   ./gpt2_tokenizer decode [FILE...]     whitespace-separated token ids -> the bytes they stand for
//   ./gpt2_tokenizer write-table [PATH]   write llm.c's decode table (default data/gpt2/gpt2_tokenizer.bin;
//                                         an existing one is kept unless --force)
//
// The vocabulary is GPT-2's encoder.json + vocab.bpe in data/gpt2 (dev/data/fetch_tokenizer.sh), or --vocab DIR.
// decode can also use a decode table (--table PATH), which is all that the trainer's sampler needs.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/error.h"
#include "llmc/tokenizer.h"

namespace {

const char* const kUsage =
    "usage: gpt2_tokenizer COMMAND [options] [FILE...]\n"
    "\n"
    "GPT-2's byte-level BPE tokenizer (see docs/tokenizer.md).\n"
    "\n"
    "commands:\n"
    "  encode [FILE...]      encode UTF-8 text into token ids, written in decimal separated by spaces.\n"
    "                        Without FILE: stdin -> one line. With FILEs: one line per file, in order.\n"
    "                        No EOT is added (--eot adds one before each input).\n"
    "  decode [FILE...]      decode whitespace-separated token ids (stdin or FILEs) and write their bytes\n"
    "  write-table [PATH]    write llm.c's decode table (magic 20240328, version 2) to PATH\n"
    "                        (default: <vocab dir>/gpt2_tokenizer.bin); an existing PATH is refused\n"
    "                        unless --force\n"
    "\n"
    "options:\n"
    "  --vocab DIR           directory with encoder.json and vocab.bpe (default: data/gpt2,\n"
    "                        fetched by dev/data/fetch_tokenizer.sh)\n"
    "  --table PATH          decode: use this llm.c decode table instead of the vocab files\n"
    "  --eot                 encode: write the <|endoftext|> id (50256) before each input's tokens\n"
    "  --stats               encode: print bytes, tokens, time and tokens/s on stderr\n"
    "  --force               write-table: replace an existing PATH\n"
    "  -h, --help            this message\n";

struct Options {
    std::string command, vocab = "data/gpt2", table, out_path;
    std::vector<std::string> files;
    bool eot = false, stats = false, force = false;
};

std::string read_all(FILE* f, const std::string& name) {
    std::string s;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    if (std::ferror(f)) llmc::fail("%s: read error", name.c_str());
    return s;
}

std::string read_input(const std::string& path) {
    if (path == "-") return read_all(stdin, "stdin");
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) llmc::fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
    std::string s;
    try { s = read_all(f, path); } catch (...) { std::fclose(f); throw; }
    std::fclose(f);
    return s;
}

void write_or_fail(const char* p, size_t n) {
    if (n && std::fwrite(p, 1, n, stdout) != n) llmc::fail("stdout: write failed (%s)", std::strerror(errno));
}

// Writes ids as "a b c\n" through a buffer (printf per id is the bottleneck otherwise).
void write_ids(const std::vector<int>& ids) {
    std::string line;
    line.reserve(ids.size() * 6 + 1);
    char num[16];
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) line.push_back(' ');
        int len = std::snprintf(num, sizeof num, "%d", ids[i]);
        line.append(num, (size_t)len);
    }
    line.push_back('\n');
    write_or_fail(line.data(), line.size());
}

int cmd_encode(const Options& o) {
    auto t0 = std::chrono::steady_clock::now();
    llmc::Tokenizer tok = llmc::Tokenizer::from_gpt2_dir(o.vocab);
    llmc::Encoder enc(tok);
    auto t1 = std::chrono::steady_clock::now();
    std::vector<std::string> inputs = o.files.empty() ? std::vector<std::string>{"-"} : o.files;
    size_t bytes = 0, tokens = 0;
    double encode_s = 0;
    std::vector<int> ids;
    for (const std::string& path : inputs) {
        std::string text = read_input(path);
        auto a = std::chrono::steady_clock::now();
        ids.clear();
        if (o.eot) ids.push_back(tok.eot());
        enc.encode(text, ids);
        encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
        bytes += text.size();
        tokens += ids.size();
        write_ids(ids);
    }
    if (std::fflush(stdout) != 0) llmc::fail("stdout: write failed (%s)", std::strerror(errno));
    if (o.stats) {
        double load_s = std::chrono::duration<double>(t1 - t0).count();
        std::fprintf(stderr, "encoded %zu bytes into %zu tokens in %.3f s (%.0f tokens/s, %.2f MB/s; vocab load %.3f s)\n",
                     bytes, tokens, encode_s, encode_s > 0 ? tokens / encode_s : 0.0,
                     encode_s > 0 ? bytes / encode_s / 1e6 : 0.0, load_s);
    }
    return 0;
}

int cmd_decode(const Options& o) {
    llmc::Tokenizer tok = o.table.empty() ? llmc::Tokenizer::from_gpt2_dir(o.vocab)
                                          : llmc::Tokenizer::from_decode_table(o.table);
    std::vector<std::string> inputs = o.files.empty() ? std::vector<std::string>{"-"} : o.files;
    for (const std::string& path : inputs) {
        std::string text = read_input(path);
        const std::string name = path == "-" ? "stdin" : path;
        std::string out;
        size_t i = 0, n = text.size(), count = 0;
        while (true) {
            while (i < n && std::strchr(" \t\r\n\v\f", text[i])) i++;
            if (i >= n) break;
            size_t start = i;
            long long v = 0;
            bool ok = true;
            while (i < n && !std::strchr(" \t\r\n\v\f", text[i])) {
                char c = text[i++];
                if (c < '0' || c > '9' || v > (1LL << 40)) ok = false;
                else v = v * 10 + (c - '0');
            }
            std::string word = text.substr(start, i - start);
            if (!ok) llmc::fail("%s: token %zu is \"%s\", expected a non-negative integer id", name.c_str(), count,
                                word.c_str());
            if ((size_t)v >= tok.vocab_size())
                llmc::fail("%s: token %zu is %lld, outside the vocabulary [0, %zu)", name.c_str(), count, v,
                           tok.vocab_size());
            out += tok.token_bytes((int)v);
            count++;
        }
        write_or_fail(out.data(), out.size());
    }
    if (std::fflush(stdout) != 0) llmc::fail("stdout: write failed (%s)", std::strerror(errno));
    return 0;
}

int cmd_write_table(const Options& o) {
    llmc::Tokenizer tok = llmc::Tokenizer::from_gpt2_dir(o.vocab);
    std::string path = o.out_path.empty() ? o.vocab + "/gpt2_tokenizer.bin" : o.out_path;
    struct stat st;
    if (!o.force && lstat(path.c_str(), &st) == 0)
        llmc::fail("%s exists; write-table does not overwrite it unless --force", path.c_str());
    tok.write_decode_table(path);
    std::fprintf(stderr, "wrote %s (%zu tokens, EOT %d)\n", path.c_str(), tok.vocab_size(), tok.eot());
    return 0;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](const char* flag) -> std::string {
            if (i + 1 >= argc) llmc::fail("%s needs a value (see --help)", flag);
            return argv[++i];
        };
        if (a == "-h" || a == "--help") { o.command = "help"; return o; }
        else if (a == "--vocab") o.vocab = value("--vocab");
        else if (a == "--table") o.table = value("--table");
        else if (a == "--eot") o.eot = true;
        else if (a == "--stats") o.stats = true;
        else if (a == "--force") o.force = true;
        else if (a.size() > 1 && a[0] == '-') llmc::fail("unknown option '%s' (see --help)", a.c_str());
        else if (o.command.empty()) o.command = a;
        else o.files.push_back(a);
    }
    if (o.command.empty()) llmc::fail("no command given: expected encode, decode or write-table (see --help)");
    if (o.command != "encode" && o.command != "decode" && o.command != "write-table")
        llmc::fail("unknown command '%s': expected encode, decode or write-table (see --help)", o.command.c_str());
    if (o.command == "write-table") {
        if (o.files.size() > 1) llmc::fail("write-table takes at most one output path");
        if (!o.files.empty()) o.out_path = o.files[0];
        o.files.clear();
    }
    if (!o.table.empty() && o.command != "decode") llmc::fail("--table only applies to decode");
    if ((o.eot || o.stats) && o.command != "encode") llmc::fail("--eot and --stats only apply to encode");
    if (o.force && o.command != "write-table") llmc::fail("--force only applies to write-table");
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Options o = parse(argc, argv);
        if (o.command == "help") { std::fputs(kUsage, stdout); return 0; }
        if (o.command == "encode") return cmd_encode(o);
        if (o.command == "decode") return cmd_decode(o);
        return cmd_write_table(o);
    } catch (const std::exception& e) {  // llmc::Error, and std::bad_alloc & co. on a machine out of memory
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
