// Checkpoint directories: names, completeness, the check of a resume candidate, creation, removal and retention
// (see checkpoint_store.h).
#include "checkpoint_store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "checkpoint_format.h"
#include "file_util.h"

namespace llmc {

std::string checkpoint_dir(const std::string& out_dir, int step) {
    char name[32];
    std::snprintf(name, sizeof name, "ckpt_%08d", step);
    return out_dir + "/" + name;
}

std::vector<int> list_checkpoint_steps(const std::string& out_dir) {
    std::vector<int> steps;
    DIR* d = opendir(out_dir.c_str());
    if (!d) return steps;
    while (dirent* e = readdir(d)) {
        const char* n = e->d_name;
        if (std::strncmp(n, "ckpt_", 5) != 0 || n[5] == 0) continue;
        bool digits = true;
        for (const char* c = n + 5; *c; c++) digits = digits && *c >= '0' && *c <= '9';
        if (!digits || std::strlen(n + 5) > 9) continue;
        struct stat st;
        if (stat((out_dir + "/" + n).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) steps.push_back(std::atoi(n + 5));
    }
    closedir(d);
    std::sort(steps.begin(), steps.end());
    return steps;
}

bool checkpoint_complete(const std::string& dir) {
    struct stat st;
    return stat((dir + "/" + CHECKPOINT_META_NAME).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void make_checkpoint_directory(const std::string& dir) {
    make_dirs(dir);
    fsync_dir(parent_dir(dir));
}

void remove_checkpoint(const std::string& dir) {
    std::remove((dir + "/" + CHECKPOINT_META_NAME).c_str());
    fsync_dir(dir);
    if (DIR* d = opendir(dir.c_str())) {
        std::vector<std::string> names;
        while (dirent* e = readdir(d))
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
        closedir(d);
        for (const std::string& n : names) std::remove((dir + "/" + n).c_str());
    }
    rmdir(dir.c_str());
}

void apply_retention(const std::string& out_dir, int keep_last, int keep_every, int newest) {
    std::vector<int> steps = list_checkpoint_steps(out_dir);
    int complete_seen = 0;
    for (size_t i = steps.size(); i-- > 0;) {
        const int s = steps[i];
        const std::string dir = checkpoint_dir(out_dir, s);
        if (s > newest) continue;  // left by a run that got further before a crash: rewritten when reached
        if (!checkpoint_complete(dir)) {
            if (s < newest) remove_checkpoint(dir);
            continue;
        }
        complete_seen++;
        const bool keep = keep_last == 0 || complete_seen <= keep_last || (keep_every > 0 && s % keep_every == 0);
        if (!keep) remove_checkpoint(dir);
    }
}

std::string checkpoint_problem(const std::string& dir, int step, int rank, int world,
                               const std::function<std::string(const CheckpointMeta&)>& check, CheckpointMeta* meta,
                               bool* shared) {
    *shared = true;
    if (!checkpoint_complete(dir)) return dir + " is incomplete (no meta.json: the run stopped while writing it)";
    std::string problem;
    try {
        *meta = read_checkpoint_meta(dir);
        if (meta->step != step)
            problem = dir + "/meta.json: field \"step\" is " + std::to_string(meta->step) +
                      ", the directory is for step " + std::to_string(step);
        if (problem.empty() && check) problem = check(*meta);
        *shared = problem.empty() ? false : *shared;
        for (size_t f = (size_t)rank; f < meta->files.size() && problem.empty(); f += (size_t)world)
            problem = verify_checkpoint_file(dir, *meta, f);
    } catch (const ResumeMismatch&) {
        throw;
    } catch (const Error& e) {
        problem = e.what();
    }
    return problem;
}

}  // namespace llmc
