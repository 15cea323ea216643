// An earlier run's files in the output directory: found, described, moved aside (see output_dir.h).
#include "output_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "checkpoint.h"
#include "error.h"

namespace llmc {

std::vector<std::string> earlier_run_files(const std::string& dir) {
    std::vector<std::string> names;
    struct stat st;
    for (const char* f : {"metrics.jsonl", "model.bin"})
        if (lstat((dir + "/" + f).c_str(), &st) == 0) names.push_back(f);
    for (int step : list_checkpoint_steps(dir)) {
        const std::string path = checkpoint_dir(dir, step);
        names.push_back(path.substr(path.find_last_of('/') + 1));
    }
    return names;
}

std::string describe_earlier_run(const std::vector<std::string>& names) {
    std::vector<std::string> files, ckpts;
    for (const std::string& n : names) (n.rfind("ckpt_", 0) == 0 ? ckpts : files).push_back(n);
    std::string s;
    for (size_t i = 0; i < files.size(); i++) s += (i ? ", " : "") + files[i];
    if (!ckpts.empty()) {
        if (!s.empty()) s += " and ";
        s += std::to_string(ckpts.size()) + " checkpoint(s) (" + ckpts.front() +
             (ckpts.size() > 1 ? " ... " + ckpts.back() : "") + ")";
    }
    return s;
}

std::string move_earlier_run_aside(const std::string& dir, const std::vector<std::string>& names) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm utc;
    gmtime_r(&now, &utc);
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    std::string aside = dir + "/previous_" + stamp;
    for (int n = 2; mkdir(aside.c_str(), 0755) != 0; n++) {
        if (errno != EEXIST) fail("%s: cannot create directory (%s)", aside.c_str(), std::strerror(errno));
        aside = dir + "/previous_" + stamp + "_" + std::to_string(n);
    }
    for (const std::string& n : names)
        if (std::rename((dir + "/" + n).c_str(), (aside + "/" + n).c_str()) != 0)
            fail("%s/%s: cannot move it into %s (%s); nothing else was moved after it", dir.c_str(), n.c_str(),
                 aside.c_str(), std::strerror(errno));
    // The renames are directory entries: make them durable before the new run writes its own files.
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return aside;
}

}  // namespace llmc
