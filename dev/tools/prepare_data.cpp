// prepare_data: text -> GPT-2 tokens -> llm.c token shards (train and val).
//
//   ./prepare_data -o data/brown data/brown/text          a directory of text files, one document per file
//   ./prepare_data -o data/x --jsonl-field text a.jsonl   JSON lines, one document per line
//
// Each document becomes EOT (50256) followed by its tokens; documents are assigned to val or train in input order
// (see --val-fraction / --val-docs) and packed into shards of --shard-size tokens (llmc/data_shard_writer.h). With
// --val-first-shard (llm.c's FineWeb split) all documents form one stream and its first shard is val.
// --bytes uses the byte-level vocabulary instead of GPT-2's (V = 256: token i is byte i, EOT is byte 0, see
// Tokenizer::bytes) and writes its decode table next to the shards, <out>/<name>_tokenizer.bin.
// Tokenization runs on --threads threads, each with its own Encoder; the output order does not depend on it.
// Nothing in the output directory changes unless the whole run succeeds: shards are written into a staging folder
// and renamed into place at the end; shards left over from an earlier, larger run of the same name are removed.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "llmc/data_shard_writer.h"
#include "llmc/error.h"
#include "llmc/file_util.h"
#include "llmc/tokenizer.h"

namespace {

using llmc::fail;
using llmc::make_dirs;
using Clock = std::chrono::steady_clock;

const char* const kUsage =
    "usage: prepare_data [options] INPUT...\n"
    "\n"
    "Tokenize text with GPT-2's tokenizer into llm.c token shards (see docs/data.md):\n"
    "  <out>/<name>_train_000000.bin, ...   and   <out>/<name>_val_000000.bin, ...\n"
    "Each document is written as EOT (50256) followed by its tokens.\n"
    "\n"
    "INPUT is a text file, a .jsonl file, or a directory (all files below it, recursively, in sorted path order;\n"
    "names starting with '.' are skipped). A text file is one document (see --doc-separator); a .jsonl file holds\n"
    "one JSON object per line whose --jsonl-field is the document's text.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR        output directory (required; created if missing)\n"
    "  -n, --name NAME         shard name prefix (default: the output directory's base name)\n"
    "  -s, --shard-size N      tokens per shard (default 100000000); the last shard of a split holds the rest\n"
    "  --val-fraction F        put this fraction of the documents in val, spread evenly: document i (from 0)\n"
    "                          is val when floor((i+1)F) > floor(iF) (default 0.05)\n"
    "  --val-docs N            instead: the first N documents are val\n"
    "  --val-first-shard       instead, llm.c's FineWeb split: all documents, in order, form one token stream cut\n"
    "                          into shards; the first shard is val (<name>_val_000000.bin), the others train,\n"
    "                          numbered by their place in the stream (<name>_train_000001.bin, ...)\n"
    "  --doc-separator SEP     split text files into documents at SEP (escapes \\n \\t \\\\ understood); each\n"
    "                          document but the last keeps its trailing SEP (e.g. --doc-separator '\\n\\n')\n"
    "  --jsonl-field NAME      the text field of .jsonl records (default: text)\n"
    "  -t, --threads N         tokenizer threads (default: the number of CPU cores)\n"
    "  --vocab DIR             GPT-2's encoder.json and vocab.bpe (default: data/gpt2)\n"
    "  --bytes                 byte-level vocabulary instead of GPT-2's: V = 256, one token per byte, EOT = byte 0\n"
    "                          (NUL, refused in the input); also writes <out>/<name>_tokenizer.bin for samples\n"
    "  -q, --quiet             no progress bar\n"
    "  -h, --help              this message\n";

struct Options {
    std::vector<std::string> inputs;
    std::string out_dir, name, vocab = "data/gpt2", separator, jsonl_field = "text";
    size_t shard_size = 100000000, val_docs = 0, threads = 0;
    double val_fraction = 0.05;
    bool use_val_docs = false, val_first_shard = false, quiet = false, help = false, bytes = false;
};

size_t parse_size(const std::string& flag, const std::string& v, size_t lo, size_t hi) {
    char* end = nullptr;
    errno = 0;
    // accept 1e8-style values too: they are common for shard sizes
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || errno || !(d >= (double)lo) || !(d <= (double)hi) || d != std::floor(d))
        fail("%s: invalid value '%s' (expected an integer in [%zu, %zu])", flag.c_str(), v.c_str(), lo, hi);
    return (size_t)d;
}

std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            char c = s[++i];
            out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c);
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

Options parse(int argc, char** argv) {
    Options o;
    bool fraction_given = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("%s needs a value (see --help)", a.c_str());
            return argv[++i];
        };
        if (a == "-h" || a == "--help") { o.help = true; return o; }
        else if (a == "-o" || a == "--output") o.out_dir = value();
        else if (a == "-n" || a == "--name") o.name = value();
        else if (a == "-s" || a == "--shard-size") o.shard_size = parse_size(a, value(), 1, llmc::shard::MAX_TOKENS);
        else if (a == "--val-docs") { o.val_docs = parse_size(a, value(), 0, (size_t)1 << 50); o.use_val_docs = true; }
        else if (a == "--val-fraction") {
            std::string v = value();
            char* end = nullptr;
            o.val_fraction = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(o.val_fraction >= 0.0 && o.val_fraction < 1.0))
                fail("--val-fraction: invalid value '%s' (expected a number in [0, 1))", v.c_str());
            fraction_given = true;
        }
        else if (a == "--val-first-shard") o.val_first_shard = true;
        else if (a == "--doc-separator") {
            o.separator = unescape(value());
            if (o.separator.empty()) fail("--doc-separator: empty separator");
        }
        else if (a == "--jsonl-field") o.jsonl_field = value();
        else if (a == "-t" || a == "--threads") o.threads = parse_size(a, value(), 1, 1024);
        else if (a == "--vocab") o.vocab = value();
        else if (a == "-q" || a == "--quiet") o.quiet = true;
        else if (a == "--bytes") o.bytes = true;
        else if (a.size() > 1 && a[0] == '-') fail("unknown option '%s' (see --help)", a.c_str());
        else o.inputs.push_back(a);
    }
    if (o.use_val_docs + fraction_given + o.val_first_shard > 1)
        fail("--val-docs, --val-fraction and --val-first-shard exclude each other");
    if (o.out_dir.empty()) fail("no output directory: give -o DIR (see --help)");
    if (o.inputs.empty()) fail("no input files or directories given (see --help)");
    while (o.out_dir.size() > 1 && o.out_dir.back() == '/') o.out_dir.pop_back();
    if (o.name.empty()) {
        size_t slash = o.out_dir.find_last_of('/');
        o.name = slash == std::string::npos ? o.out_dir : o.out_dir.substr(slash + 1);
        if (o.name.empty() || o.name == "." || o.name == "..") fail("cannot derive a shard name from '%s': give --name", o.out_dir.c_str());
    }
    if (o.name.find('/') != std::string::npos) fail("--name '%s' must not contain '/'", o.name.c_str());
    if (o.threads == 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
    return o;
}

// ---- inputs ---------------------------------------------------------------------------------------------------

struct InputFile { std::string path; size_t size; bool jsonl; };

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Inputs are text: a binary file would be tokenized as if it were text, silently. Refused: a binary file of ours (a
// token shard, above all one of this tool's own earlier outputs; its magic number is the first int32 of a 1024-byte
// header), compressed data (by its signature) and anything else with a NUL byte in its first 64 KiB (text and JSON
// lines never hold one; UTF-16 text does, and is refused too). "" when the file looks like text.
std::string binary_kind(const std::string& path, size_t size) {
    std::vector<unsigned char> head(std::min<size_t>(size, 65536));
    FILE* f = std::fopen(path.c_str(), "rb");
    const bool got = f && std::fread(head.data(), 1, head.size(), f) == head.size();
    if (f) std::fclose(f);
    if (!got) return "";
    auto starts = [&](const char* sig, size_t n) { return head.size() >= n && std::memcmp(head.data(), sig, n) == 0; };
    if (starts("\x1f\x8b", 2)) return "gzip-compressed file (decompress it first: gunzip -k)";
    if (starts("BZh", 3)) return "bzip2-compressed file (decompress it first: bunzip2 -k)";
    if (starts("\xfd" "7zXZ\0", 6)) return "xz-compressed file (decompress it first: unxz -k)";
    if (starts("\x28\xb5\x2f\xfd", 4)) return "zstd-compressed file (decompress it first: unzstd)";
    if (starts("PK\x03\x04", 4)) return "zip archive (extract it first)";
    if (starts("7z\xbc\xaf\x27\x1c", 6)) return "7-zip archive (extract it first)";
    if (size >= 1024 && head.size() >= 4) {
        int32_t magic;
        std::memcpy(&magic, head.data(), sizeof magic);
        switch (magic) {
            case 20240520: return "token shard";
            case 20240326: return "model file";
            case 20240328: return "tokenizer decode table";
            case 20240522: return "HellaSwag eval file";
            case 20241106: return "checkpoint optimizer file";
            default: break;
        }
    }
    if (!head.empty() && std::memchr(head.data(), 0, head.size())) return "binary file (it holds NUL bytes; text never does)";
    return "";
}

// Collects the input files below `path`. The output directory (`out_dir`, identified by device and inode; null
// when it does not exist yet) is never read: inside an input directory it is skipped, as an input it is refused.
void collect(const std::string& path, std::vector<InputFile>& out, bool top, const struct stat* out_dir) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
    if (S_ISDIR(st.st_mode) && out_dir && st.st_dev == out_dir->st_dev && st.st_ino == out_dir->st_ino) {
        if (top)
            fail("%s: this input is the output directory (-o); its shards would be read back as text: give the "
                 "directory of the text files", path.c_str());
        std::fprintf(stderr, "skipping %s: it is the output directory (-o)\n", path.c_str());
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR* d = opendir(path.c_str());
        if (!d) fail("%s: cannot read directory (%s)", path.c_str(), std::strerror(errno));
        std::vector<std::string> names;
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') names.push_back(e->d_name);
        closedir(d);
        std::sort(names.begin(), names.end());
        for (const std::string& n : names) collect(path + "/" + n, out, false, out_dir);
        if (top && names.empty()) fail("%s: empty directory (no input files)", path.c_str());
    } else if (S_ISREG(st.st_mode)) {
        FILE* f = std::fopen(path.c_str(), "rb");  // fail now, before any output, if it is unreadable
        if (!f) fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
        std::fclose(f);
        const std::string kind = binary_kind(path, (size_t)st.st_size);
        if (!kind.empty())
            fail("%s: a %s, not text (prepare_data reads text and .jsonl files; remove it from the inputs)",
                 path.c_str(), kind.c_str());
        out.push_back({path, (size_t)st.st_size, ends_with(path, ".jsonl")});
    } else if (top) {
        fail("%s: not a regular file or directory", path.c_str());
    }
}

std::string read_whole(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
    std::string s;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    bool err = std::ferror(f);
    std::fclose(f);
    if (err) fail("%s: read error", path.c_str());
    return s;
}

// Yields documents in input order, in batches of about kBatchBytes.
class DocumentReader {
public:
    DocumentReader(const std::vector<InputFile>& files, const Options& o) : files_(files), o_(o) {}
    // Fills `docs` with the next batch; false when the inputs are exhausted. `bytes_done` counts input bytes read.
    bool next_batch(std::vector<std::string>& docs) {
        static constexpr size_t kBatchBytes = 16 << 20, kBatchDocs = 1 << 14;
        docs.clear();
        size_t bytes = 0;
        while (bytes < kBatchBytes && docs.size() < kBatchDocs) {
            if (!pending_.empty()) {  // documents of a text file split by --doc-separator
                docs.push_back(std::move(pending_.back()));
                pending_.pop_back();
                bytes += docs.back().size();
                continue;
            }
            if (jsonl_) {
                std::string line;
                if (std::getline(*jsonl_, line)) {
                    line_no_++;
                    bytes_done += line.size() + 1;
                    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
                    std::string text = jsonl_text(line);
                    if (text.empty()) continue;  // empty documents are skipped, as empty files are
                    bytes += text.size();
                    docs.push_back(std::move(text));
                    continue;
                }
                if (jsonl_->bad()) fail("%s: read error", files_[next_ - 1].path.c_str());
                jsonl_.reset();
            }
            if (next_ >= files_.size()) break;
            const InputFile& f = files_[next_++];
            if (f.jsonl) {
                jsonl_ = std::make_unique<std::ifstream>(f.path, std::ios::binary);
                if (!*jsonl_) fail("%s: cannot open (%s)", f.path.c_str(), std::strerror(errno));
                line_no_ = 0;
                continue;
            }
            std::string text = read_whole(f.path);
            bytes_done += text.size();
            if (o_.separator.empty()) {
                if (!text.empty()) { bytes += text.size(); docs.push_back(std::move(text)); }
                continue;
            }
            std::vector<std::string> parts;  // split, keeping the separator at the end of each part but the last
            for (size_t pos = 0; pos < text.size();) {
                size_t at = text.find(o_.separator, pos);
                size_t end = at == std::string::npos ? text.size() : at + o_.separator.size();
                parts.push_back(text.substr(pos, end - pos));
                pos = end;
            }
            std::reverse(parts.begin(), parts.end());
            pending_ = std::move(parts);
        }
        return !docs.empty();
    }
    size_t bytes_done = 0;

private:
    std::string jsonl_text(const std::string& line) {
        const std::string& path = files_[next_ - 1].path;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            fail("%s:%zu: not valid JSON (%s)", path.c_str(), line_no_, e.what());
        }
        if (!j.is_object() || !j.contains(o_.jsonl_field) || !j[o_.jsonl_field].is_string())
            fail("%s:%zu: expected a JSON object with a string field \"%s\"", path.c_str(), line_no_,
                 o_.jsonl_field.c_str());
        return j[o_.jsonl_field].get<std::string>();
    }
    const std::vector<InputFile>& files_;
    const Options& o_;
    size_t next_ = 0, line_no_ = 0;
    std::unique_ptr<std::ifstream> jsonl_;
    std::vector<std::string> pending_;
};

// ---- progress -------------------------------------------------------------------------------------------------

class Progress {
public:
    Progress(size_t total_bytes, bool enabled)
        : total_(total_bytes), enabled_(enabled), tty_(isatty(2)), last_(tty_ ? -1e9 : 0.0) {}
    void update(size_t bytes, size_t docs, size_t tokens, bool final = false) {
        if (!enabled_) return;
        double t = std::chrono::duration<double>(Clock::now() - start_).count();
        // A terminal gets a redrawn bar 5 times a second; a log gets one line every 10 seconds.
        if (!final && t - last_ < (tty_ ? 0.2 : 10.0)) return;
        last_ = t;
        double frac = total_ ? std::min(1.0, (double)bytes / (double)total_) : 1.0;
        int width = 30, filled = (int)(frac * width);
        double eta = frac > 0 ? t / frac - t : 0;
        std::fprintf(stderr, "%s[%.*s%*s] %5.1f%% %zu docs %zu tokens %.2fM tok/s ETA %.0fs%s", tty_ ? "\r" : "",
                     filled, "##############################", width - filled, "", 100 * frac, docs, tokens,
                     t > 0 ? tokens / t / 1e6 : 0.0, eta, tty_ && !final ? "" : "\n");
        std::fflush(stderr);
    }

private:
    size_t total_;
    bool enabled_, tty_;
    double last_;  // time of the last line drawn
    Clock::time_point start_ = Clock::now();
};

// ---- output ---------------------------------------------------------------------------------------------------

// The staging folder: removed with everything in it unless the run succeeds.
struct Staging {
    std::string dir;
    ~Staging() {
        if (dir.empty()) return;
        if (DIR* d = opendir(dir.c_str())) {
            while (dirent* e = readdir(d))
                if (e->d_name[0] != '.') std::remove((dir + "/" + e->d_name).c_str());
            closedir(d);
        }
        rmdir(dir.c_str());
    }
};

int run(const Options& o) {
    auto t0 = Clock::now();
    std::vector<InputFile> files;
    struct stat out_st;
    const bool out_exists = stat(o.out_dir.c_str(), &out_st) == 0 && S_ISDIR(out_st.st_mode);
    for (const std::string& in : o.inputs) collect(in, files, true, out_exists ? &out_st : nullptr);
    size_t total_bytes = 0;
    for (const InputFile& f : files) total_bytes += f.size;
    if (files.empty()) fail("no input files found in %s", o.inputs[0].c_str());
    if (total_bytes == 0) fail("empty corpus: %zu input file(s), all empty", files.size());

    llmc::Tokenizer tok = o.bytes ? llmc::Tokenizer::bytes() : llmc::Tokenizer::from_gpt2_dir(o.vocab);
    if (tok.vocab_size() > 65536) fail("vocabulary of %zu tokens does not fit uint16 shards", tok.vocab_size());
    make_dirs(o.out_dir);
    Staging staging;
    staging.dir = o.out_dir + "/.prepare_data." + std::to_string(getpid());
    if (mkdir(staging.dir.c_str(), 0777) != 0) fail("%s: cannot create (%s)", staging.dir.c_str(), std::strerror(errno));

    llmc::ShardWriter train(staging.dir, o.name, "train", o.shard_size), val(staging.dir, o.name, "val", o.shard_size);
    std::vector<std::unique_ptr<llmc::Encoder>> encoders;
    if (!o.bytes)
        for (size_t t = 0; t < o.threads; t++) encoders.push_back(std::make_unique<llmc::Encoder>(tok));
    auto t_loaded = Clock::now();

    DocumentReader reader(files, o);
    Progress progress(total_bytes, !o.quiet);
    std::vector<std::string> docs;
    std::vector<std::vector<int>> ids;
    size_t n_docs = 0, n_val_docs = 0;
    while (reader.next_batch(docs)) {
        ids.resize(docs.size());
        if (o.bytes)  // byte 0 separates documents: a NUL inside one would split it silently
            for (size_t i = 0; i < docs.size(); i++)
                if (docs[i].find('\0') != std::string::npos)
                    fail("document %zu contains a NUL byte (offset %zu): with --bytes, byte 0 is the document "
                         "separator, and NUL is not text", n_docs + i, docs[i].find('\0'));
        std::atomic<size_t> next{0};
        auto work = [&](size_t t) {
            for (size_t i; (i = next.fetch_add(1)) < docs.size();) {
                ids[i].clear();
                ids[i].push_back(tok.eot());
                if (o.bytes) ids[i].insert(ids[i].end(), (const unsigned char*)docs[i].data(),
                                           (const unsigned char*)docs[i].data() + docs[i].size());
                else encoders[t]->encode(docs[i], ids[i]);
            }
        };
        std::vector<std::thread> pool;
        for (size_t t = 1; t < std::min(o.threads, docs.size()); t++) pool.emplace_back(work, t);
        work(0);
        for (std::thread& th : pool) th.join();
        for (size_t i = 0; i < docs.size(); i++, n_docs++) {
            double f = o.val_fraction;
            // The 1e-9 keeps exact multiples (e.g. 20 x 0.05) from landing just below an integer.
            // --val-first-shard: everything goes to one stream ("train" here); its first shard becomes val below.
            bool is_val = o.val_first_shard ? false
                          : o.use_val_docs  ? n_docs < o.val_docs
                                            : std::floor((n_docs + 1) * f + 1e-9) > std::floor(n_docs * f + 1e-9);
            (is_val ? val : train).add(ids[i].data(), ids[i].size());
            n_val_docs += is_val;
        }
        progress.update(reader.bytes_done, n_docs, train.tokens() + val.tokens());
    }
    if (n_docs == 0) fail("empty corpus: no documents in %zu input file(s)", files.size());
    train.finish();
    val.finish();
    progress.update(total_bytes, n_docs, train.tokens() + val.tokens(), true);

    // Where each staged shard goes: (split, index). With --val-first-shard the stream's shard 0 is val 0 and shard
    // i > 0 is train i (llm.c's names: the index is the place in the stream); otherwise each split counts from 0.
    struct Placed {
        std::string staged, split;
        size_t index;
    };
    std::vector<Placed> places;
    for (size_t i = 0; i < train.paths().size(); i++)
        places.push_back({train.paths()[i], o.val_first_shard && i == 0 ? "val" : "train", i});
    for (size_t i = 0; i < val.paths().size(); i++) places.push_back({val.paths()[i], "val", i});
    // Move the new shards into place, then remove shards of this name that are not part of this run (left by an
    // earlier, larger run, or by a run with the other split: train_000000 is not written with --val-first-shard).
    std::vector<std::string> written;
    size_t end_index[2] = {0, 0};  // per split (train, val): one past the highest index written
    for (const Placed& p : places) {
        std::string dst = llmc::shard_path(o.out_dir, o.name, p.split, p.index);
        if (std::rename(p.staged.c_str(), dst.c_str()) != 0)
            fail("%s: cannot rename into place (%s)", dst.c_str(), std::strerror(errno));
        written.push_back(dst);
        size_t& e = end_index[p.split == "val"];
        e = std::max(e, p.index + 1);
    }
    for (const char* split : {"train", "val"}) {
        auto stale = [&](size_t i) {
            std::string path = llmc::shard_path(o.out_dir, o.name, split, i);
            if (std::remove(path.c_str()) != 0) return false;
            std::fprintf(stderr, "removed %s (left over from an earlier run)\n", path.c_str());
            return true;
        };
        const size_t end = end_index[std::string(split) == "val"];
        if (o.val_first_shard && std::string(split) == "train") stale(0);
        for (size_t i = end; stale(i); i++) {}
    }
    if (o.bytes) {
        const std::string table = o.out_dir + "/" + o.name + "_tokenizer.bin";
        tok.write_decode_table(table);
        written.push_back(table);
    }
    if (n_val_docs == 0 && !o.val_first_shard)
        std::fprintf(stderr, "warning: no validation documents (see --val-fraction / --val-docs)\n");
    if (o.val_first_shard && train.paths().size() < 2)
        std::fprintf(stderr, "warning: the whole corpus fits the first shard: everything is val, there is no train shard\n");

    auto t1 = Clock::now();
    double secs = std::chrono::duration<double>(t1 - t0).count();
    double load = std::chrono::duration<double>(t_loaded - t0).count(), work = secs - load;
    size_t tokens = train.tokens() + val.tokens();
    if (o.val_first_shard) {
        const size_t val_tokens = std::min(tokens, o.shard_size);
        std::printf("documents: %zu, one stream; its first shard is val\n", n_docs);
        std::printf("tokens:    %zu (train %zu, val %zu), EOT before each document\n", tokens, tokens - val_tokens,
                    val_tokens);
    } else {
        std::printf("documents: %zu (train %zu, val %zu)\n", n_docs, n_docs - n_val_docs, n_val_docs);
        std::printf("tokens:    %zu (train %zu, val %zu), EOT before each document%s\n", tokens, train.tokens(),
                    val.tokens(), o.bytes ? " (byte-level: V = 256, EOT = byte 0)" : "");
    }
    std::printf("input:     %zu files, %zu bytes\n", files.size(), total_bytes);
    std::printf("time:      %.2f s (vocabulary load %.2f s); %.0f tokens/s after loading, on %zu threads\n", secs, load,
                work > 0 ? tokens / work : 0.0, o.threads);
    for (const std::string& p : written) std::printf("wrote %s\n", p.c_str());
    // The shards are in place; a summary that could not be written is still an error (a full disk, a closed pipe).
    if (std::fflush(stdout) != 0) fail("stdout: write failed (%s)", std::strerror(errno));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Options o = parse(argc, argv);
        if (o.help) { std::fputs(kUsage, stdout); return 0; }
        return run(o);
    } catch (const std::exception& e) {  // llmc::Error, and std::bad_alloc & co. on a machine out of memory
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
