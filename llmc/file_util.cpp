#include "file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.h"

namespace llmc {

namespace {

const char* file_kind(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

}  // namespace

void require_regular_file(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        fail("%s: %s, expected a regular file", path.c_str(), file_kind(st.st_mode));
}

FILE* open_or_fail(const std::string& path, const char* mode) {
    if (mode[0] == 'r') require_regular_file(path);  // before open(): opening a FIFO waits for a writer forever
    FILE* f = std::fopen(path.c_str(), mode);
    if (!f) fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
    return f;
}

size_t file_size_or_fail(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) fail("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("%s: %s, expected a regular file", path.c_str(), file_kind(st.st_mode));
    return (size_t)st.st_size;
}

void read_exact(FILE* f, void* dst, size_t n, const std::string& path) {
    size_t got = std::fread(dst, 1, n, f);
    if (got != n) fail("%s: truncated (wanted %zu more bytes, got %zu)", path.c_str(), n, got);
}

void write_exact(FILE* f, const void* src, size_t n, const std::string& path) {
    if (std::fwrite(src, 1, n, f) != n) fail("%s: write failed (%s)", path.c_str(), std::strerror(errno));
}

std::string parent_dir(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

void fsync_dir(const std::string& dir) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

void make_dirs(const std::string& dir) {
    std::string path;
    for (size_t i = 0; i <= dir.size(); i++) {
        if ((i == dir.size() || dir[i] == '/') && !path.empty() && mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
            fail("%s: cannot create directory (%s)", path.c_str(), std::strerror(errno));
        if (i < dir.size()) path += dir[i];
    }
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail("%s: not a directory", dir.c_str());
}

namespace {

// Fills `path`'s temporary (same directory) through `write` and flushes it to disk; returns its name. On any error
// the temporary is removed and the error rethrown.
std::string write_temporary(const std::string& path, const std::function<void(FILE*)>& write) {
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail("%s: cannot create (%s)", tmp.c_str(), std::strerror(errno));
    try {
        write(f);
        if (std::fflush(f) != 0 || fsync(fileno(f)) != 0)
            fail("%s: cannot flush to disk (%s)", tmp.c_str(), std::strerror(errno));
    } catch (...) {
        std::fclose(f);
        std::remove(tmp.c_str());
        throw;
    }
    if (std::fclose(f) != 0) {
        std::remove(tmp.c_str());
        fail("%s: close failed (%s)", tmp.c_str(), std::strerror(errno));
    }
    return tmp;
}

}  // namespace

void write_atomically(const std::string& path, const std::function<void(FILE*)>& write) {
    write_files_atomically({{path, write}});
}

void write_files_atomically(const std::vector<std::pair<std::string, std::function<void(FILE*)>>>& files) {
    std::vector<std::string> temps;
    try {
        for (const auto& [path, write] : files) temps.push_back(write_temporary(path, write));
    } catch (...) {
        for (const std::string& t : temps) std::remove(t.c_str());
        throw;
    }
    for (size_t i = 0; i < files.size(); i++) {
        const std::string& path = files[i].first;
        if (std::rename(temps[i].c_str(), path.c_str()) != 0) {
            const int err = errno;
            for (size_t j = i; j < temps.size(); j++) std::remove(temps[j].c_str());
            fail("%s: cannot rename into place (%s)", path.c_str(), std::strerror(err));
        }
        fsync_dir(parent_dir(path));
    }
}

}  // namespace llmc
