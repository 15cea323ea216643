// Small file helpers shared by every reader and writer: whole-file checks, atomic replacement, directories.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

// Opens or fails with "<path>: cannot open (<strerror>)". For reading, only a regular file (require_regular_file).
FILE* open_or_fail(const std::string& path, const char* mode);
// Fails with "<path>: a FIFO (named pipe), expected a regular file" (a directory, a device...) when `path` exists
// and is not a regular file: inputs are checked before they are opened (a FIFO would block the open).
void require_regular_file(const std::string& path);
// Size of a file in bytes, or fails naming the path.
size_t file_size_or_fail(const std::string& path);
// Reads exactly n bytes or fails with "<path>: truncated ...".
void read_exact(FILE* f, void* dst, size_t n, const std::string& path);
// Writes `path` atomically: `write` fills a temporary file in the same directory, which is flushed, fsync'ed and
// renamed over `path` (then the directory is fsync'ed). If `write` throws, the temporary is removed and `path` is
// untouched.
void write_atomically(const std::string& path, const std::function<void(FILE*)>& write);
// Several files that belong together (a model and its config): every temporary is written and flushed first, and
// only then are they renamed into place, so a write that fails part-way (a full disk) leaves none of them.
void write_files_atomically(const std::vector<std::pair<std::string, std::function<void(FILE*)>>>& files);
// fwrite that fails with the path on a short write.
void write_exact(FILE* f, const void* src, size_t n, const std::string& path);
// mkdir -p: creates `dir` and every missing parent (0755); fails naming the first one that cannot be made, or `dir`
// when it exists but is not a directory.
void make_dirs(const std::string& dir);
// fsync of a directory, so the entries just made or removed in it survive a crash (best effort: errors ignored).
void fsync_dir(const std::string& dir);
// "a/b" for "a/b/c", "." for "c", "/" for "/c".
std::string parent_dir(const std::string& path);

}  // namespace llmc
